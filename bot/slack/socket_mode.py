"""`trainbot serve --socket-mode`: Slack over the WebSocket the bot opens (apps.connections.open with the
app-level token), for a bot with no public HTTP endpoint. Each envelope goes to the same Bolt app as
/slack/events would, and its ack is timed the same.

slack_sdk's built-in client: Bolt's default, no dependency of its own, and it reconnected cleanly when
Slack refreshed the connection where the websocket-client one asked for extra URLs and once stalled 10 s.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from actions.errors import Unavailable
from actions.settings import SettingsError

if TYPE_CHECKING:
    from slack_bolt.adapter.socket_mode.builtin import SocketModeHandler
    from slack_sdk.socket_mode.client import BaseSocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest

    from actions.settings import Settings
    from bot.http.metrics import Metrics
    from bot.slack.app import SlackBot

log = logging.getLogger(__name__)


def check_socket_mode_settings(settings: Settings) -> None:
    """Socket Mode takes the bot token and the app-level token (no signing secret): say which is missing."""
    needed = (
        ("SLACK_BOT_TOKEN", settings.slack_bot_token, "the bot token, xoxb-"),
        ("SLACK_APP_TOKEN", settings.slack_app_token, "an app-level token, xapp-, with scope connections:write"),
    )
    if missing := [f"{name} ({what})" for name, secret, what in needed if not secret.get_secret_value()]:
        raise SettingsError(f"--socket-mode needs {' and '.join(missing)}")


def connect_socket_mode(settings: Settings, bot: SlackBot, metrics: Metrics) -> SocketModeHandler:
    """Open Slack's Socket Mode WebSocket for `bot`, from daemon threads that reconnect when Slack asks or
    the connection drops; each envelope is acked as an HTTP request would be, and timed the same."""
    from slack_bolt.adapter.socket_mode.builtin import SocketModeHandler  # noqa: PLC0415
    from slack_sdk.errors import SlackApiError  # noqa: PLC0415

    # apps.connections.open goes through the bot's client, so TRAINBOT_SLACK_API_URL steers it too.
    handler = SocketModeHandler(bot.app, settings.slack_app_token.get_secret_value())

    def acked(client: BaseSocketModeClient, request: SocketModeRequest) -> None:
        started = time.perf_counter()
        handler.handle(client, request)
        metrics.ack_seconds.observe(time.perf_counter() - started)

    handler.client.socket_mode_request_listeners[:] = [acked]
    try:
        handler.connect()
    except (SlackApiError, OSError) as error:
        handler.close()
        reason = error.response["error"] if isinstance(error, SlackApiError) else error
        raise Unavailable(
            f"Slack at {settings.slack_api_url} opened no Socket Mode connection for SLACK_APP_TOKEN ({reason}); "
            "check the app-level token (xapp-, scope connections:write), and TRAINBOT_SLACK_API_URL if a proxy "
            "stands between"
        ) from None
    if not handler.client.is_connected():
        log.warning("Socket Mode: the WebSocket did not open; trying again every %s s", handler.client.ping_interval)
    else:
        log.info("Slack comes over Socket Mode")
    return handler
