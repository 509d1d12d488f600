"""Slack's Block Kit limits, as its reference documents them (docs.slack.dev/reference/block-kit), walked
once for two uses: the local Slack (bot/console/local_slack.py) refuses what exceeds them as Slack does, and
bot/render/blocks.py cuts what the bot renders to fit them.

`limits(blocks)` yields every limited value: a string (at most `most` characters) or a list (at most
`most` items), by its holder and key so a caller can read or replace it, with its JSON pointer for
Slack's error message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MESSAGE_BLOCKS = 50
VIEW_BLOCKS = 100
MESSAGE_TEXT = 40_000
SECTION_TEXT = 3000
SECTION_FIELDS = 10
FIELD_TEXT = 2000
HEADER_TEXT = 150
CONTEXT_ELEMENTS = 10
ACTIONS_ELEMENTS = 25
# A text object outside a section (a context element): Slack's general ceiling.
TEXT_OBJECT = 3000
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
URL = 3000
ID = 255
PLACEHOLDER = 150
OPTION_TEXT = 75
OPTION_VALUE = 150
OPTIONS = 100
OVERFLOW_OPTIONS = 5
LABEL = 2000
ALT_TEXT = 2000
INPUT_VALUE = 3000
VIEW_TITLE = 24
PRIVATE_METADATA = 3000
CONFIRM = {"title": 100, "text": 300, "confirm": 30, "deny": 30}


@dataclass(frozen=True)
class Limit:
    """`holder[key]` holds at most `most` characters (a string) or items (a list)."""

    holder: dict[str, Any]
    key: str
    most: int
    pointer: str

    @property
    def value(self) -> Any:
        return self.holder[self.key]

    def exceeded(self) -> bool:
        return isinstance(self.value, (str, list)) and len(self.value) > self.most

    def problem(self) -> str:
        """Slack's words for it, with its JSON pointer."""
        if isinstance(self.value, list):
            return f"no more than {self.most} items allowed [json-pointer:{self.pointer}]"
        return f"must be less than {self.most + 1} characters [json-pointer:{self.pointer}]"


def limits(blocks: list[Any], pointer: str = "/blocks") -> Iterator[Limit]:
    """Every limit inside `blocks` (the count of the blocks themselves is the caller's: 50 or 100)."""
    for index, block in enumerate(blocks):
        if isinstance(block, dict):
            yield from _block(block, f"{pointer}/{index}")


def view_limits(view: dict[str, Any], pointer: str = "/view") -> Iterator[Limit]:
    """A modal's limits: its title and buttons, metadata, and up to 100 blocks."""
    for key in ("title", "submit", "close"):
        yield from _text(view, key, VIEW_TITLE, pointer)
    yield from _value(view, "private_metadata", PRIVATE_METADATA, pointer)
    yield from _value(view, "callback_id", ID, pointer)
    yield from _value(view, "external_id", ID, pointer)
    yield from _value(view, "blocks", VIEW_BLOCKS, pointer)
    yield from limits(view.get("blocks") or [], f"{pointer}/blocks")


def _block(block: dict[str, Any], at: str) -> Iterator[Limit]:
    yield from _value(block, "block_id", ID, at)
    kind = block.get("type")
    if kind == "section":
        yield from _text(block, "text", SECTION_TEXT, at)
        yield from _value(block, "fields", SECTION_FIELDS, at)
        for index, field in enumerate(_items(block, "fields")):
            yield from _value(field, "text", FIELD_TEXT, f"{at}/fields/{index}")
        yield from _element(block.get("accessory"), f"{at}/accessory")
    elif kind == "header":
        yield from _text(block, "text", HEADER_TEXT, at)
    elif kind == "context":
        yield from _value(block, "elements", CONTEXT_ELEMENTS, at)
        for index, element in enumerate(_items(block, "elements")):
            yield from _value(element, "text", TEXT_OBJECT, f"{at}/elements/{index}")
            yield from _value(element, "alt_text", ALT_TEXT, f"{at}/elements/{index}")
    elif kind == "actions":
        yield from _value(block, "elements", ACTIONS_ELEMENTS, at)
        for index, element in enumerate(_items(block, "elements")):
            yield from _element(element, f"{at}/elements/{index}")
    elif kind == "input":
        yield from _text(block, "label", LABEL, at)
        yield from _text(block, "hint", LABEL, at)
        yield from _element(block.get("element"), f"{at}/element")
    elif kind == "image":
        yield from _value(block, "alt_text", ALT_TEXT, at)
        yield from _value(block, "image_url", URL, at)
        yield from _text(block, "title", ALT_TEXT, at)


def _element(element: Any, at: str) -> Iterator[Limit]:
    if not isinstance(element, dict):
        return
    kind = element.get("type")
    yield from _value(element, "action_id", ID, at)
    yield from _text(element, "placeholder", PLACEHOLDER, at)
    if kind == "button":
        yield from _text(element, "text", BUTTON_TEXT, at)
        yield from _value(element, "value", BUTTON_VALUE, at)
        yield from _value(element, "url", URL, at)
    elif kind == "plain_text_input":
        yield from _value(element, "initial_value", INPUT_VALUE, at)
    elif kind == "image":
        yield from _value(element, "alt_text", ALT_TEXT, at)
    yield from _value(element, "options", OVERFLOW_OPTIONS if kind == "overflow" else OPTIONS, at)
    for index, option in enumerate(_items(element, "options")):
        yield from _text(option, "text", OPTION_TEXT, f"{at}/options/{index}")
        yield from _text(option, "description", OPTION_TEXT, f"{at}/options/{index}")
        yield from _value(option, "value", OPTION_VALUE, f"{at}/options/{index}")
    confirm = element.get("confirm")
    if isinstance(confirm, dict):
        for key, most in CONFIRM.items():
            yield from _text(confirm, key, most, f"{at}/confirm")


def _text(holder: dict[str, Any], key: str, most: int, at: str) -> Iterator[Limit]:
    """The text of the text object `holder[key]`, when there is one."""
    text_object = holder.get(key)
    if isinstance(text_object, dict):
        yield from _value(text_object, "text", most, f"{at}/{key}")


def _value(holder: Any, key: str, most: int, at: str) -> Iterator[Limit]:
    """`holder[key]` (a string or a list), when there is one."""
    if isinstance(holder, dict) and isinstance(holder.get(key), (str, list)):
        yield Limit(holder, key, most, f"{at}/{key}")


def _items(holder: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [item for item in holder.get(key) or [] if isinstance(item, dict)]


MESSAGE_METHODS = frozenset({"chat.postMessage", "chat.postEphemeral", "chat.update", "chat.scheduleMessage"})
VIEW_METHODS = frozenset({"views.open", "views.update", "views.push", "views.publish"})


def slack_refusal(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """What Slack answers when a message or view breaks a limit ({"ok": false, "error": ...}); None if none.

    `method` is a Web API method, or "response_url" (a message too). Slack refuses a message's text past
    40,000 characters with msg_too_long, its blocks with invalid_blocks, a view with invalid_arguments.
    """
    if method in MESSAGE_METHODS or method == "response_url":
        text = params.get("text")
        if isinstance(text, str) and len(text) > MESSAGE_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        blocks = params.get("blocks") or []
        problems = [f"no more than {MESSAGE_BLOCKS} items allowed [json-pointer:/blocks]"] * (
            len(blocks) > MESSAGE_BLOCKS
        ) + [limit.problem() for limit in limits(blocks) if limit.exceeded()]
        return _refused("invalid_blocks", problems, errors=True)
    if method in VIEW_METHODS and isinstance(params.get("view"), dict):
        return _refused(
            "invalid_arguments", [limit.problem() for limit in view_limits(params["view"]) if limit.exceeded()]
        )
    return None


def _refused(error: str, problems: list[str], errors: bool = False) -> dict[str, Any] | None:
    if not problems:
        return None
    detail = {"errors": problems} if errors else {}
    return {
        "ok": False,
        "error": error,
        **detail,
        "response_metadata": {"messages": [f"[ERROR] {p}" for p in problems]},
    }
