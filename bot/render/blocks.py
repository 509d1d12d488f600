"""Block Kit messages rendered from the jinja2 templates in bot/render/templates/, safe and within Slack's limits.

Every value a person typed goes through `mrkdwn` (Slack's three escapes, so `<!channel>` shows as text
and pings nobody) and then `tojson` (so it stays inside its JSON string). A template writes its blocks
as JSON objects one after another, no commas between (loops and conditions stay simple); `render`
reads them back and keeps the message within Slack's limits (bot/render/slack_limits.py): every text is cut
with `clip`, every list to its count, the blocks to 50 (a modal's to 100) with a note of how many more.
Identifiers and button values are never cut (that would change what they name): they are ours, short.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from bot.render.slack_limits import MESSAGE_BLOCKS, SECTION_TEXT, VIEW_BLOCKS, Limit, limits, view_limits

MAX_BLOCKS = MESSAGE_BLOCKS
MAX_SECTION_CHARS = SECTION_TEXT
MAX_FALLBACK_CHARS = 3000
ELLIPSIS = "…"
FENCE = "```"
SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,20}")
SLACK_GROUP = re.compile(r"S[A-Z0-9]{2,20}")


@dataclass(frozen=True)
class Message:
    """What the bot posts: the notification text (also the fallback) and the blocks."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)


def mrkdwn(value: object) -> str:
    """Slack's escaping for text in mrkdwn and plain_text: &, < and > only."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(value: object) -> str:
    """Escaped text in a code span; a backtick in it would end the span, so it becomes a look-alike."""
    return "`" + mrkdwn(value).replace("`", "ˋ") + "`"  # noqa: RUF001 - the look-alike is the point


def mention(value: object) -> str:
    """A Slack user or user-group id as a mention; anything else (a CLI user name) as plain text."""
    text = str(value)
    if SLACK_USER.fullmatch(text):
        return f"<@{text}>"
    if SLACK_GROUP.fullmatch(text):
        return f"<!subteam^{text}>"
    return mrkdwn(text)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a marker (…); a closing code fence is kept, so the cut stays code."""
    if len(text) <= limit:
        return text
    if text.endswith(FENCE) and limit > 2 * len(FENCE):
        return clip(text.removesuffix(FENCE), limit - len(FENCE)) + FENCE
    return text[: limit - 1] + ELLIPSIS


_environment = Environment(
    loader=PackageLoader("bot.render", "templates"),
    undefined=StrictUndefined,
    autoescape=False,  # Block Kit JSON, not HTML: values are escaped by `mrkdwn` and `tojson`
    trim_blocks=True,
    lstrip_blocks=True,
)
_environment.filters["mrkdwn"] = mrkdwn
_environment.filters["code"] = code
_environment.filters["mention"] = mention
_environment.filters["clip"] = clip
_environment.policies["json.dumps_kwargs"] = {"ensure_ascii": False}


def render_view(template: str, **context: Any) -> dict[str, Any]:
    """A modal view (one JSON object) from bot/render/templates/<template>.j2, cut to Slack's limits."""
    [view] = _blocks(template, context)
    view["blocks"] = _fewer(view.get("blocks") or [], VIEW_BLOCKS)
    _cut(view_limits(view))
    return view


def render(template: str, text: str, **context: Any) -> Message:
    """The blocks of bot/render/templates/<template>.j2, cut to Slack's limits; `text` (plain, escaped here) is the
    notification."""
    return _message(text, _within_limits(_blocks(template, context)))


def render_whole(template: str, text: str, **context: Any) -> Message | None:
    """Like `render`, but None where the blocks would have to be cut to fit Slack's limits (then say it
    another way, as a file)."""
    blocks = _blocks(template, context)
    if len(blocks) > MAX_BLOCKS or any(limit.exceeded() for limit in limits(blocks)):
        return None
    return _message(text, blocks)


def _blocks(template: str, context: dict[str, Any]) -> list[dict[str, Any]]:
    return list(_objects(_environment.get_template(f"{template}.j2").render(**context)))


def _message(text: str, blocks: list[dict[str, Any]]) -> Message:
    # The notification text is mrkdwn too: escaped like the blocks, so it pings nobody either.
    return Message(clip(mrkdwn(text), MAX_FALLBACK_CHARS), blocks)


def notice(text: str) -> Message:
    """A one-line message: `text` escaped, in one section."""
    return render("notice", text, message=text)


def _objects(rendered: str) -> Iterator[dict[str, Any]]:
    decoder = json.JSONDecoder()
    position = 0
    while (position := _skip_space(rendered, position)) < len(rendered):
        block, position = decoder.raw_decode(rendered, position)
        yield block


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _within_limits(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    blocks = _fewer(blocks, MAX_BLOCKS)
    _cut(limits(blocks))
    return blocks


def _fewer(blocks: list[dict[str, Any]], most: int) -> list[dict[str, Any]]:
    """At most `most` blocks, the last saying how many more there were."""
    if len(blocks) <= most:
        return blocks
    left_out = len(blocks) - (most - 1)
    note = {"type": "context", "elements": [{"type": "mrkdwn", "text": f"{ELLIPSIS} and {left_out} more"}]}
    return [*blocks[: most - 1], note]


def _cut(found: Iterable[Limit]) -> None:
    """Texts clipped and lists shortened to their limits, in place."""
    for limit in list(found):  # walked whole first: cutting replaces lists the walk reads
        if not limit.exceeded():
            continue
        if isinstance(limit.value, list):
            limit.holder[limit.key] = limit.value[: limit.most]
        elif limit.key == "text":
            limit.holder[limit.key] = clip(limit.value, limit.most)
