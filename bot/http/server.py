"""The HTTP server under `trainbot serve`: waitress, with bounds, and a graceful stop.

waitress reads each request whole in one event loop before a bounded pool of threads runs the app, so a
client that stalls mid-body holds a buffer, not a thread, and is dropped after READ_TIMEOUT_S. It
refuses a malformed request line or Content-Length (400) and a body over the limit (413) before
reading it; those answers never reach the app, so they are counted and logged here.

On SIGTERM or SIGINT the listening socket closes, requests already read are answered, idle connections
close, then `drain` finishes the work already acked; all of it within the grace, which the Deployment's
terminationGracePeriodSeconds exceeds (deploy/kustomize/base/deployment.yaml).
"""

from __future__ import annotations

import json
import logging
import signal
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, create_server
from waitress.task import ErrorTask

from bot.http.metrics import Metrics

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("trainbot.http")

# How often the event loop looks up from its sockets to see whether it was asked to stop.
LOOP_TIMEOUT_S = 0.2
# Logged values a client chose are cut to this; an access line stays one short line.
MAX_LOGGED_CHARS = 120
# Drained work left undone: nothing to wait for.
NO_WORK: Callable[[float], int] = lambda timeout_s: 0  # noqa: E731


@dataclass(frozen=True)
class Limits:
    # Threads that run the app; requests beyond them wait, read, in the event loop's queue.
    threads: int = 8
    # Open connections; past it the server stops accepting until some close.
    connections: int = 100
    # A connection silent this long, between requests or mid-request, is closed.
    read_timeout_s: int = 10
    # Alertmanager's 8 MiB storms are the largest body a route takes; each route checks its own limit.
    max_body_bytes: int = 8 * 1024 * 1024
    max_header_bytes: int = 64 * 1024
    # From SIGTERM to exit: answer what was read, then finish the acked work.
    grace_s: float = 25.0


class BodyRefused(Exception):
    """A request body over the route's limit, or one without a length: refused unread."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def read_body(environ: WSGIEnvironment, limit: int) -> bytes:
    """The body, once its Content-Length says it is at most `limit` bytes; BodyRefused otherwise."""
    length = environ.get("CONTENT_LENGTH", "")
    if not length.isdigit():
        raise BodyRefused(411, "send a Content-Length")
    if int(length) > limit:
        raise BodyRefused(413, f"the body is {length} bytes; at most {limit} are taken")
    return environ["wsgi.input"].read(int(length))


def json_answer(start_response: StartResponse, status: int, document: dict[str, Any]) -> list[bytes]:
    body = json.dumps(document).encode()
    start_response(
        f"{status} {HTTPStatus(status).phrase}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
    )
    return [body]


def log_answer(request_id: str, method: str, path: str, status: str, size: int, started: float) -> None:
    """One line per answer, never the body; what the client chose (method, path) escaped."""
    elapsed_ms = (time.perf_counter() - started) * 1000
    log.info(
        "request=%s method=%s path=%s status=%s bytes_in=%d ms=%.1f",
        request_id, escaped(method), escaped(path), status, size, elapsed_ms,
    )  # fmt: skip


def escaped(text: str) -> str:
    """`text` quoted, cut short, its newlines and control characters escaped: it cannot forge a log line."""
    return json.dumps(text[:MAX_LOGGED_CHARS])


def serve(
    app: WSGIApplication,
    host: str,
    port: int,
    limits: Limits = Limits(),
    metrics: Metrics | None = None,
    drain: Callable[[float], int] = NO_WORK,
    ready: Callable[[str], None] = print,
) -> int:
    """Serve until SIGTERM or SIGINT, then stop gracefully; the acked work left undone when the grace ran out."""
    server = _server(app, host, port, limits, metrics)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    ready(f"trainbot serving on http://{host}:{server.effective_port}")
    _run_until(server, stop)
    log.info("stopping: answering what was read, then finishing acked work, within %g s", limits.grace_s)
    deadline = time.monotonic() + limits.grace_s
    _answer_what_was_read(server, deadline)
    undone = drain(max(0.0, deadline - time.monotonic()))
    server.task_dispatcher.shutdown(cancel_pending=True, timeout=0)
    server.close()
    if undone:
        log.warning("stopped with %d acked Slack command(s) unfinished after the %g s grace", undone, limits.grace_s)
    return undone


@contextmanager
def serving_locally(app: WSGIApplication, metrics: Metrics | None = None) -> Iterator[str]:
    """`app` on a free loopback port, served from a thread (the console, tests) until the block ends."""
    server = _server(app, "127.0.0.1", 0, Limits(), metrics)
    stop = threading.Event()
    loop = threading.Thread(target=_run_until, args=(server, stop), daemon=True)
    loop.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        stop.set()
        loop.join()
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=1)
        server.close()


def _server(app: WSGIApplication, host: str, port: int, limits: Limits, metrics: Metrics | None) -> BaseWSGIServer:
    server = create_server(
        app,
        host=host,
        port=port,
        threads=limits.threads,
        connection_limit=limits.connections,
        channel_timeout=limits.read_timeout_s,
        # How often silent connections are looked for: a stalled one lives at most twice the timeout.
        cleanup_interval=limits.read_timeout_s,
        max_request_body_size=limits.max_body_bytes,
        max_request_header_size=limits.max_header_bytes,
        asyncore_use_poll=True,
        ident="trainbot",
    )
    server.channel_class = _counted_channel(metrics or Metrics())
    return server


def _counted_channel(metrics: Metrics) -> type[HTTPChannel]:
    """waitress's connection, its own error answers (malformed request, body too large) counted and logged."""

    class CountedError(ErrorTask):
        def execute(self) -> None:
            started = time.perf_counter()
            # Counted before the answer is written: a client that reads it and scrapes /metrics must see it.
            status = str(self.request.error.code)
            metrics.answered("server", status)
            super().execute()
            # A request refused at its first line has neither.
            method, path = (getattr(self.request, name, None) or "" for name in ("command", "path"))
            log_answer("-", method, path, status, 0, started)

    class CountedChannel(HTTPChannel):
        error_task_class = CountedError

    return CountedChannel


def _run_until(server: BaseWSGIServer, stop: threading.Event) -> None:
    while not stop.is_set():
        wasyncore.loop(timeout=LOOP_TIMEOUT_S, use_poll=True, map=server._map, count=1)


def _answer_what_was_read(server: BaseWSGIServer, deadline: float) -> None:
    """Stop accepting; answer the requests already read; close each connection once it has nothing to send."""
    # The listening socket only: BaseWSGIServer.close would also close the trigger that answers wake the loop with.
    wasyncore.dispatcher.close(server)
    while server.active_channels and time.monotonic() < deadline:
        for channel in list(server.active_channels.values()):
            if not (channel.requests or channel.total_outbufs_len):
                # Idle keep-alive, or a request not yet read whole: nothing was promised to it.
                channel.will_close = True
        wasyncore.loop(timeout=LOOP_TIMEOUT_S, use_poll=True, map=server._map, count=1)


@contextmanager
def in_thread(server: socketserver.BaseServer) -> Iterator[str]:
    """Serve `server` (a stand-in) from a daemon thread until the block ends; yields its base URL."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
