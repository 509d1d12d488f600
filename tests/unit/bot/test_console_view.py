"""What the console prints for what the bot posts: emoji as a terminal shows them."""

from __future__ import annotations

import re
from pathlib import Path

from actions.people import People
from bot.console.local_slack import Call
from bot.console.view import EMOJI_SHOWN, ConsoleView

BOT = Path(__file__).resolve().parents[3] / "bot"
# An emoji code in a template, or in a Python string literal (":x:"), as the bot's messages write them.
POSTED_EMOJI = re.compile(r"""(?:^|[\s"'(]):([a-z_]+):(?=[\s"')]|$)""", re.MULTILINE)


def posted_emoji() -> set[str]:
    """Every emoji code the bot's own messages use (the console's own files aside)."""
    files = [*BOT.rglob("*.j2"), *(path for path in BOT.rglob("*.py") if path.parent.name != "console")]
    return {code for path in files for code in POSTED_EMOJI.findall(path.read_text(encoding="utf-8"))}


def test_every_emoji_the_bot_posts_has_its_picture_in_the_console():
    found = posted_emoji()
    assert {"large_blue_circle", "red_circle", "hourglass_flowing_sand"} <= found  # the scan sees them
    assert sorted(found - set(EMOJI_SHOWN)) == []


def test_emoji_codes_print_as_emoji_and_unknown_codes_stay_as_written():
    view = ConsoleView(People())
    posted = Call(
        "chat.postMessage",
        {"channel": "C0CONSOLE", "text": ":large_blue_circle: *info* `slow-steps` · :tada: done at 12:30:45"},
        {"ts": "1.0"},
    )
    assert view.lines(posted) == ["#1 trainbot in C0CONSOLE: 🔵 *info* `slow-steps` · :tada: done at 12:30:45"]
