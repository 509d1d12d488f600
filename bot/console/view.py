"""What the console prints for each Web API call the bot makes: Block Kit read back as terminal text.

Messages are numbered (#3), replies indented under their thread, edits shown as the message's new text,
ephemeral answers marked "(only you)", buttons numbered for `click N`, modals shown with their inputs.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from actions.people import People
from bot.console.local_slack import Call

MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
SUBTEAM = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|([^>]*))?>")
LINK = re.compile(r"<((?:https?|mailto):[^|>]+)\|([^>]+)>")
BARE_LINK = re.compile(r"<((?:https?|mailto):[^>]+)>")
INDENT = "    "
EMOJI = re.compile(r":([a-z_]+):")
# The emoji the bot's messages use, as a terminal shows them (tests/unit/bot/test_console_view.py checks that every
# code in bot/ is here); any other code stays as it is written.
EMOJI_SHOWN = {
    "white_check_mark": "✅", "x": "❌", "arrow_forward": "▶", "hourglass_flowing_sand": "⏳",
    "black_square_for_stop": "⏹", "warning": "⚠", "rotating_light": "🚨", "package": "📦", "grey_question": "❔",
    "red_circle": "🔴", "large_orange_circle": "🟠", "large_blue_circle": "🔵", "book": "📖", "mute": "🔇",
}  # fmt: skip


@dataclass(frozen=True)
class Button:
    label: str
    action_id: str
    value: str
    message: Call  # the post (or its latest edit) the button is on


@dataclass
class ConsoleView:
    """Turns calls into lines; remembers message numbers and the buttons shown, by number."""

    people: People  # whose user id is whose name: a mention shows as @name
    buttons: dict[int, Button] = field(default_factory=dict)
    _numbers: dict[str, int] = field(default_factory=dict)  # ts -> message number
    _threads: dict[str, str] = field(default_factory=dict)  # ts -> the ts of its thread's parent

    def lines(self, call: Call) -> list[str]:
        params = call.params
        if call.method == "chat.postMessage":
            ts, thread = call.answer.get("ts", ""), params.get("thread_ts") or ""
            number = self._numbers.setdefault(ts, len(self._numbers) + 1)
            if thread:
                self._threads[ts] = thread
                head = f"{INDENT}↳ #{number} in the thread of #{self._numbers.get(thread, '?')}: "
            else:
                head = f"#{number} trainbot in {self._where(str(params.get('channel')))}: "
            return self._message(head, call, indent=INDENT if thread else "")
        if call.method == "chat.update":
            ts = params.get("ts", "")
            indent = INDENT if ts in self._threads else ""
            return self._message(f"{indent}✎ #{self._numbers.get(ts, '?')} now: ", call, indent=indent)
        if call.method in ("chat.postEphemeral", "response_url"):
            return self._message("(only you) ", call, indent="")
        if call.method == "views.open":
            return self._modal(params.get("view") or {})
        return []

    def _where(self, channel: str) -> str:
        """A channel id, or a direct message when the bot writes to a user id."""
        return f"a direct message to @{self.people.name(channel)}" if channel[:1] in "UW" else channel

    def plain(self, text: str) -> str:
        """mrkdwn as a person reads it: mentions as @name, links as text (url), escapes undone."""
        text = MENTION.sub(lambda found: "@" + self.people.name(found[1]), text)
        text = SUBTEAM.sub(lambda found: "@" + (found[2] or found[1]).lstrip("@"), text)
        text = LINK.sub(lambda found: f"{found[2]} ({found[1]})", text)
        text = BARE_LINK.sub(lambda found: found[1], text)
        text = EMOJI.sub(lambda found: EMOJI_SHOWN.get(found[1], found[0]), text)
        return html.unescape(text)

    def _message(self, head: str, call: Call, indent: str) -> list[str]:
        blocks = call.params.get("blocks") or []
        texts = [line for block in blocks for line in self._block(block, call)] or [call.params.get("text", "")]
        first, *rest = "\n".join(texts).split("\n")
        return [head + self.plain(first), *(indent + "  " + self.plain(line) for line in rest)]

    def _block(self, block: dict[str, Any], call: Call) -> list[str]:
        kind = block.get("type")
        if kind in ("section", "header"):
            fields = [item.get("text", "") for item in block.get("fields") or []]
            return [text for text in [plain_text(block.get("text")), *fields] if text]
        if kind == "context":
            return [" ".join(plain_text(element) for element in block.get("elements") or [])]
        if kind == "actions":
            return ["  ".join(self._button(element, call) for element in block.get("elements") or [])]
        if kind == "divider":
            return ["—" * 20]
        if kind == "image":
            return [f"[image: {block.get('alt_text', '')}]"]
        return []

    def _button(self, element: dict[str, Any], call: Call) -> str:
        number = len(self.buttons) + 1
        label = plain_text(element.get("text"))
        self.buttons[number] = Button(label, element.get("action_id", ""), element.get("value", ""), call)
        return f"[{number}] {label}"

    def _modal(self, view: dict[str, Any]) -> list[str]:
        lines = [f"┌ {plain_text(view.get('title'))}"]
        for block in view.get("blocks") or []:
            if block.get("type") == "input":
                lines.append(f"│ {plain_text(block.get('label'))}: type it on the next line")
            else:
                lines += [f"│ {self.plain(text)}" for text in self._block(block, Call("views.open", {}, {}))]
        return lines


def plain_text(value: Any) -> str:
    """The text of a Block Kit text object (or of a plain value)."""
    if isinstance(value, dict):
        return str(value.get("text", ""))
    return "" if value is None else str(value)
