"""Slack's side of Socket Mode on one machine, for the tests: the WebSocket server whose URL the local Slack's
apps.connections.open hands out (tests/standins/slack_standin.py). Each URL carries a ticket good for one connection; on
it the server says `hello`, then sends the envelopes a test gives it, shaped as Slack documents them, and
records what the app sends back (its acks, `{"envelope_id": ...}`). aiohttp's server speaks the WebSocket
protocol (and answers the app's pings), on an event loop of its own in a daemon thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import WSMsgType, web

WAIT_S = 15.0
APP_ID = "A0TRAINBOT"
LINK_PATH = "/link/"


class LocalSocketMode:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.url = ""  # ws://127.0.0.1:PORT/link/ once serving
        # What the app sent over its sockets, in order: acks, each {"envelope_id": ..., ["payload": ...]}.
        self.acks: list[dict[str, Any]] = []
        self.connections = 0  # how many the app opened, reconnections included
        self._loop = loop
        self._tickets: set[str] = set()
        self._sockets: list[web.WebSocketResponse] = []
        self._changed = threading.Condition()

    def link(self) -> str:
        """A new URL for apps.connections.open, its ticket good for one connection."""
        ticket = uuid.uuid4().hex
        with self._changed:
            self._tickets.add(ticket)
        return f"{self.url}?ticket={ticket}&app_id={APP_ID}"

    def send(self, kind: str, payload: dict[str, Any], accepts_response_payload: bool = False) -> str:
        """Send an envelope of `kind` ("slash_commands", "interactive", "events_api") on the app's newest
        connection; its envelope_id."""
        envelope_id = str(uuid.uuid4())
        self._send(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": accepts_response_payload,
            }
        )
        return envelope_id

    def disconnect(self, reason: str = "refresh_requested") -> None:
        """Warn the app as Slack does before it closes a connection: the app is to open another."""
        self._send({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-local"}})

    def wait_connected(self, count: int = 1, timeout_s: float = WAIT_S) -> None:
        """Until the app has opened `count` connections and one is open; fails the test after `timeout_s`."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.connections >= count and self._sockets, timeout=timeout_s):
                raise AssertionError(f"{count} Socket Mode connection(s) expected within {timeout_s} s")

    def wait_for_ack(self, envelope_id: str, timeout_s: float = WAIT_S) -> dict[str, Any]:
        """The app's ack of `envelope_id`; fails the test if none came within `timeout_s`."""

        def found() -> list[dict[str, Any]]:
            return [ack for ack in self.acks if ack.get("envelope_id") == envelope_id]

        with self._changed:
            if not self._changed.wait_for(found, timeout=timeout_s):
                raise AssertionError(f"no ack of {envelope_id} within {timeout_s} s; got {self.acks}")
            return found()[0]

    def _send(self, message: dict[str, Any]) -> None:
        self.wait_connected()
        with self._changed:
            socket = self._sockets[-1]
        asyncio.run_coroutine_threadsafe(socket.send_json(message), self._loop).result(WAIT_S)

    async def connection(self, request: web.Request) -> web.StreamResponse:
        with self._changed:
            ticket = request.query.get("ticket", "")
            known = ticket in self._tickets
            self._tickets.discard(ticket)
        if not known:
            raise web.HTTPUnauthorized(text="no such ticket, or it was used: call apps.connections.open for a URL")
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json(
            {
                "type": "hello",
                "num_connections": 1,
                "debug_info": {"host": "applink-local", "build_number": 1, "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
        )
        with self._changed:
            self._sockets.append(socket)
            self.connections += 1
            self._changed.notify_all()
        try:
            async for message in socket:
                if message.type == WSMsgType.TEXT:
                    with self._changed:
                        self.acks.append(json.loads(message.data))
                        self._changed.notify_all()
        finally:
            with self._changed:
                self._sockets.remove(socket)
        return socket

    async def close(self) -> None:
        with self._changed:
            sockets = list(self._sockets)
        for socket in sockets:
            await socket.close()


@contextmanager
def local_socket_mode() -> Iterator[LocalSocketMode]:
    """Serve Socket Mode on loopback until the block ends."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="local-socket-mode", daemon=True)
    thread.start()
    stand_in = LocalSocketMode(loop)
    app = web.Application()
    app.router.add_get(LINK_PATH, stand_in.connection)
    runner = web.AppRunner(app, handle_signals=False)

    async def start() -> str:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        return f"ws://{host}:{port}{LINK_PATH}"

    async def stop() -> None:
        await stand_in.close()
        await runner.cleanup()

    stand_in.url = asyncio.run_coroutine_threadsafe(start(), loop).result(WAIT_S)
    try:
        yield stand_in
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(WAIT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT_S)
        loop.close()
