"""The bot as Slack reaches it in the tests: its settings and `trainbot serve` environment pointing at the Slack
stand-in (tests/standins/slack_standin.py), serving its WSGI app on loopback, a signed slash command and its reply, the
text a person sees in a reply, and what a message was edited to."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from wsgiref.simple_server import make_server

from slack_bolt.adapter.wsgi import SlackRequestHandler

from actions.promotions.service import Promotions
from actions.settings import Settings
from bot.console.local_slack import Call, post_signed, slash_command_body
from bot.http.server import in_thread
from bot.services import Services
from bot.slack.app import build_slack_app
from bot.web.app import make_app
from tests.servers.processes import free_port
from tests.standins.slack_standin import SlackStandIn

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

SECRET = "signing-secret-of-the-test-app"


def slack_settings(tmp_path: Path, slack: SlackStandIn, **overrides: object) -> Settings:
    """Settings of a bot that talks to `slack` and keeps its state in `tmp_path`."""
    return Settings(
        **{
            "data_dir": tmp_path,
            "slack_bot_token": "xoxb-test",
            "slack_signing_secret": SECRET,
            "slack_api_url": slack.api_url,
            "local_dashboard_port": free_port(),  # no head answers there
            **overrides,
        }
    )


def serving_in_thread(app: WSGIApplication) -> Iterator[str]:
    """Serve the WSGI `app` from a thread while the generator runs; yields its Slack events URL."""
    with in_thread(make_server("127.0.0.1", 0, app)) as url:
        yield f"{url}/slack/events"


def serving_bot(settings: Settings) -> Iterator[str]:
    """The whole bot over `settings` (every Slack listener, its own promotions), served from a thread while the
    generator runs; yields its Slack events URL."""
    promotions = Promotions(settings)
    slack_bot = build_slack_app(Services(settings, promotions=promotions))
    yield from serving_in_thread(make_app(promotions, SlackRequestHandler(slack_bot.app)))
    # Closed now rather than when collected, which could touch this test's folder during a later test.
    slack_bot.poster.posts.close()
    promotions.store.close()


def command(
    bot: str, slack: SlackStandIn, slash: str, text: str, user: str = "U01ALICE", channel: str = "C0ML"
) -> dict:
    """Send a signed slash command; the bot's reply as it reached the response_url."""
    before = len([call for call in slack.calls if call.method == "response_url"])
    answer = post_signed(bot, SECRET, slash_command_body(slack, slash, text, user, channel))
    assert (answer.status_code, answer.text) == (200, "")
    return slack.wait_for("response_url", before + 1)[-1].params


def texts(reply: dict) -> str:
    """The text a person sees: the blocks' texts, or the message text where there are no blocks."""
    if not reply.get("blocks"):
        return reply["text"]
    parts = []
    for block in reply["blocks"]:
        parts.append(json.dumps(block.get("text", {}).get("text", ""), ensure_ascii=False))
        parts += [json.dumps(field["text"], ensure_ascii=False) for field in block.get("fields", [])]
        for element in block.get("elements", []):
            text = element.get("text", "")
            parts.append(json.dumps(text["text"] if isinstance(text, dict) else text, ensure_ascii=False))
    return "\n".join(json.loads(part) for part in parts)


def edits_of(slack: SlackStandIn, post: Call) -> list[str]:
    """The texts `post` was edited to (chat.update), in order."""
    return [
        call.params["text"]
        for call in slack.calls
        if call.method == "chat.update" and call.params["ts"] == post.answer["ts"]
    ]


def serve_env(slack: SlackStandIn, data_dir: Path, **more: str) -> dict[str, str]:
    """The environment of a `trainbot serve` that answers Slack through the stand-in (`more`: TRAINBOT_*)."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("TRAINBOT_", "SLACK_"))}
    return {
        **clean,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": SECRET,
        "TRAINBOT_SLACK_API_URL": slack.api_url,
        "TRAINBOT_DATA_DIR": str(data_dir),
        **{f"TRAINBOT_{name.upper()}": value for name, value in more.items()},
    }
