"""The local Slack the tests talk to: the console's (bot/console/local_slack.py) plus what only a test needs:
waiting for the bot's calls (failing the test when they do not come), the calls Slack would have refused for a
broken limit, and Socket Mode's WebSocket (tests/standins/local_socket_mode.py), which apps.connections.open
opens for the app-level token."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from bot.console.local_slack import Call, LocalSlack, serving_slack
from tests.standins.local_socket_mode import LocalSocketMode, local_socket_mode

WAIT_S = 15.0
# The app-level token apps.connections.open takes (as its bearer), and no other.
APP_TOKEN = "xapp-1-A0TRAINBOT-1-local"
OVERFLOW_ERRORS = frozenset({"invalid_blocks", "msg_too_long", "invalid_arguments"})


class SlackStandIn(LocalSlack):
    def __init__(self, url: str, socket_mode: LocalSocketMode | None = None) -> None:
        super().__init__(url)
        self.app_token = APP_TOKEN
        # Socket Mode's side of Slack, when slack_standin(socket_mode=True) serves it.
        self.socket_mode = socket_mode
        self._changed = threading.Condition()
        self.listeners.append(self._notify)

    def _notify(self, _: Call) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, method: str, count: int = 1, timeout_s: float = WAIT_S) -> list[Call]:
        """The calls of `method` once there are `count` of them; fails the test after `timeout_s`."""

        def found() -> list[Call]:
            return [call for call in self.calls if call.method == method]

        with self._changed:
            if not self._changed.wait_for(lambda: len(found()) >= count, timeout=timeout_s):
                raise AssertionError(f"{count} {method} call(s) expected within {timeout_s} s; got {self.calls}")
            return found()

    def check_within_limits(self) -> None:
        """Fail the test if Slack refused any call for breaking a Block Kit or message limit."""
        overflows = [(call.method, call.answer) for call in self.calls if call.answer.get("error") in OVERFLOW_ERRORS]
        assert not overflows, overflows

    def answer(self, method: str, params: dict[str, Any], token: str) -> dict[str, Any]:
        if method == "apps.connections.open" and method not in self.refusing:
            return self._connections_open(token)
        return super().answer(method, params, token)

    def _connections_open(self, token: str) -> dict[str, Any]:
        """A WebSocket URL for the app-level token, sent as the bearer; a bot token is the wrong type."""
        if not token:
            return {"ok": False, "error": "not_authed"}
        if token.startswith("xox"):
            return {"ok": False, "error": "not_allowed_token_type"}
        if token != self.app_token or self.socket_mode is None:
            return {"ok": False, "error": "invalid_auth"}
        return {"ok": True, "url": self.socket_mode.link()}


@contextmanager
def slack_standin(socket_mode: bool = False) -> Iterator[SlackStandIn]:
    """The stand-in, served until the block ends; with `socket_mode`, Socket Mode's WebSocket too."""
    with ExitStack() as stack:
        sockets = stack.enter_context(local_socket_mode()) if socket_mode else None
        yield stack.enter_context(serving_slack(lambda url: SlackStandIn(url, sockets)))
