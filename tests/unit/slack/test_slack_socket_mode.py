"""Slack over Socket Mode: the same Bolt app, reached through a real WebSocket that the local Slack's
apps.connections.open opens for the app-level token; envelopes shaped as Slack sends them, acks recorded."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from pydantic import SecretStr
from slack_bolt.adapter.socket_mode.builtin import SocketModeHandler

from actions.errors import Unavailable
from actions.settings import Settings
from bot.console.local_slack import Call, button_click_payload, slash_command_fields
from bot.http.metrics import Metrics
from bot.services import Services
from bot.slack.app import build_slack_app
from bot.slack.socket_mode import connect_socket_mode
from tests.paths import TRAINBOT
from tests.servers.processes import free_port, serving
from tests.standins.local_socket_mode import LocalSocketMode
from tests.standins.slack_bot import slack_settings, texts
from tests.standins.slack_standin import APP_TOKEN, SlackStandIn, slack_standin

# Slack waits this long for an ack before it tells the person the command failed.
ACK_LIMIT_S = 3.0
# slack_sdk's built-in client reads with a 3 s timeout, and closes the old connection (under the read's lock)
# before it reads the new one: an envelope that comes in the meantime waits up to that long.
SWITCHOVER_S = 3.0
# A message a button sits on: the local Slack never posted it, and the click does not need it to have.
POSTED = Call("chat.postMessage", {"text": "tiny-transformer v3 -> staging"}, {"channel": "C0ML", "ts": "1718.000100"})


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    with slack_standin(socket_mode=True) as stand_in:
        yield stand_in
    stand_in.check_within_limits()


@pytest.fixture
def socket_mode_settings(tmp_path: Path, slack: SlackStandIn) -> Settings:
    """A bot with an app-level token and no signing secret: over Socket Mode there are no requests to sign."""
    return slack_settings(tmp_path, slack, slack_signing_secret="", slack_app_token=APP_TOKEN)


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


def connected(settings: Settings, metrics: Metrics) -> Iterator[SocketModeHandler]:
    handler = connect_socket_mode(settings, build_slack_app(Services(settings), metrics), metrics)
    try:
        yield handler
    finally:
        handler.close()


@pytest.fixture
def socket(socket_mode_settings: Settings, slack: SlackStandIn, metrics: Metrics) -> Iterator[LocalSocketMode]:
    """Slack's end of the bot's open Socket Mode connection."""
    assert slack.socket_mode is not None
    for _ in connected(socket_mode_settings, metrics):
        slack.socket_mode.wait_connected()
        yield slack.socket_mode


def slash(socket: LocalSocketMode, slack: SlackStandIn, command: str, text: str, within_s: float = ACK_LIMIT_S) -> dict:
    """Send a slash command as Slack does over Socket Mode; once acked in time, the reply at its response_url."""
    before = len([call for call in slack.calls if call.method == "response_url"])
    envelope_id = socket.send(
        "slash_commands", slash_command_fields(slack, command, text), accepts_response_payload=True
    )
    assert socket.wait_for_ack(envelope_id, timeout_s=within_s) == {"envelope_id": envelope_id}
    return slack.wait_for("response_url", before + 1)[-1].params


def test_the_app_token_opens_the_socket_and_train_help_is_acked_and_answered(socket, slack, metrics):
    [opened] = [call for call in slack.calls if call.method == "apps.connections.open"]
    assert opened.answer["url"].startswith(f"{socket.url}?ticket=")
    reply = slash(socket, slack, "/train", "help")
    assert reply["response_type"] == "ephemeral"
    assert "`/train status [--wait] JOB`" in texts(reply)
    assert metrics.registry.get_sample_value("trainbot_slack_ack_seconds_count") == 1  # the ack was timed


def test_a_button_click_envelope_is_acked_and_answered_to_the_clicker_alone(socket, slack):
    click = button_click_payload(slack, "promotion_approve", "pr-nosuch", "U01ALICE", POSTED)
    envelope_id = socket.send("interactive", click)
    assert socket.wait_for_ack(envelope_id, timeout_s=ACK_LIMIT_S) == {"envelope_id": envelope_id}
    [told] = slack.wait_for("chat.postEphemeral")
    assert (told.params["channel"], told.params["user"]) == ("C0ML", "U01ALICE")
    assert told.params["text"] == "no promotion request pr-nosuch; `trainbot model requests` lists them"


def test_when_slack_refreshes_the_connection_the_bot_opens_a_new_one_and_goes_on(socket, slack):
    socket.disconnect("refresh_requested")
    socket.wait_connected(2)
    assert len([call for call in slack.calls if call.method == "apps.connections.open"]) == 2
    reply = slash(socket, slack, "/model", "help", within_s=ACK_LIMIT_S + SWITCHOVER_S)
    assert texts(reply).startswith("/model\n`/model promote NAME VERSION TARGET`")


@pytest.mark.parametrize(
    ("token", "error"),
    [("xapp-1-A0TRAINBOT-1-not-this-one", "invalid_auth"), ("xoxb-test", "not_allowed_token_type")],
    ids=["unknown", "bot-token"],
)
def test_an_app_token_slack_refuses_is_one_clear_error(socket_mode_settings, slack, metrics, token, error):
    refused = socket_mode_settings.model_copy(update={"slack_app_token": SecretStr(token)})
    with pytest.raises(Unavailable, match=rf"opened no Socket Mode connection for SLACK_APP_TOKEN \({error}\)"):
        for _ in connected(refused, metrics):
            pass
    assert slack.socket_mode is not None and slack.socket_mode.connections == 0


def environment(slack: SlackStandIn, tmp_path: Path, **slack_env: str) -> dict[str, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("TRAINBOT_", "SLACK_"))}
    return {**clean, **slack_env, "TRAINBOT_SLACK_API_URL": slack.api_url, "TRAINBOT_DATA_DIR": str(tmp_path)}


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s"}, "SLACK_APP_TOKEN"),
        ({"SLACK_APP_TOKEN": APP_TOKEN}, "SLACK_BOT_TOKEN"),
    ],
)
def test_serve_socket_mode_without_a_token_exits_with_one_line_naming_it(slack, tmp_path, env, missing):
    result = subprocess.run(
        [str(TRAINBOT), "serve", "--socket-mode", "--port", str(free_port())],
        capture_output=True, text=True, timeout=120, env=environment(slack, tmp_path, **env), check=False,
    )  # fmt: skip
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"trainbot: --socket-mode needs {missing} (")
    assert not slack.calls  # refused before anything was started


def test_serve_socket_mode_takes_slack_over_the_socket_and_serves_the_rest_over_http(slack, tmp_path):
    port = free_port()
    env = environment(slack, tmp_path, SLACK_BOT_TOKEN="xoxb-test", SLACK_APP_TOKEN=APP_TOKEN)
    command = [str(TRAINBOT), "serve", "--socket-mode", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    assert slack.socket_mode is not None
    with serving(command, tmp_path / "serve.log", f"{url}/healthz", env):
        reply = slash(slack.socket_mode, slack, "/train", "help")
        events = requests.post(f"{url}/slack/events", data=b"x", timeout=10)
        scraped = requests.get(f"{url}/metrics", timeout=10).text
    assert "`/train status [--wait] JOB`" in texts(reply)
    assert events.status_code == 404
    assert "Socket Mode" in events.json()["error"]
    assert "trainbot_slack_ack_seconds_count 1.0" in scraped


def test_config_masks_the_app_token(slack, tmp_path):
    result = subprocess.run(
        [str(TRAINBOT), "config"], capture_output=True, text=True, timeout=120, check=True,
        env=environment(slack, tmp_path, SLACK_APP_TOKEN=APP_TOKEN),
    )  # fmt: skip
    assert '"slack_app_token": "**********"' in result.stdout
    assert APP_TOKEN not in result.stdout
