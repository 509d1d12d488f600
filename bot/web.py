"""`trainbot serve`: trainbot's HTTP endpoints, one WSGI app.

POST /slack/events goes to the slack-bolt App (bot/slack_app.py) when Slack is configured (with
--socket-mode Slack comes over a WebSocket the bot opens instead, and that route says so); POST
/webhooks/mlflow takes MLflow's registry webhooks (checked and handled in actions/promotions.py);
GET /healthz answers while the process serves; GET /metrics is the bot's own (bot/metrics.py).
Each route parses the request, calls one action and renders JSON; an error a sender can fix gets its
status and message, anything else a correlation id.
"""

from __future__ import annotations

import json
import logging
import socketserver
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from actions.errors import ActionError, BadRequest, Unauthorized, Unavailable
from actions.mlflow_webhook import DELIVERY_HEADER, MAX_BODY_BYTES, SIGNATURE_HEADER, TIMESTAMP_HEADER
from actions.settings import SettingsError
from bot.metrics import Metrics

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from slack_bolt.adapter.socket_mode.builtin import SocketModeHandler
    from slack_sdk.socket_mode.client import BaseSocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest

    from actions.promotions import Promotions
    from actions.settings import Settings
    from bot.slack_app import SlackBot

log = logging.getLogger(__name__)

Answer = tuple[int, dict[str, Any]]
SLACK_PATH = "/slack/events"
METRICS_PATH = "/metrics"
WEBHOOK_HEADERS = (DELIVERY_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)
ERROR_STATUS: dict[type[ActionError], int] = {BadRequest: 400, Unauthorized: 401, Unavailable: 503}
# What /slack/events answers when no Bolt handler serves it.
SLACK_NOT_CONFIGURED: Answer = (
    503,
    {"error": "Slack is not configured: set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN"},
)
SLACK_OVER_SOCKET_MODE: Answer = (
    404,
    {"error": "this trainbot takes Slack over Socket Mode (trainbot serve --socket-mode), not at /slack/events"},
)


class BodyRefused(Exception):
    """A request body over the route's limit, or one without a length: refused unread."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def make_app(
    promotions: Promotions,
    slack: WSGIApplication | None = None,
    metrics: Metrics | None = None,
    slack_off: Answer = SLACK_NOT_CONFIGURED,
) -> WSGIApplication:
    """The router; `slack` is Bolt's WSGI handler, or None when Slack does not come over HTTP (then
    /slack/events answers `slack_off`)."""
    metrics = metrics or Metrics()

    def mlflow_webhook(environ: WSGIEnvironment) -> Answer:
        headers = {name: environ.get(_cgi_name(name), "") for name in WEBHOOK_HEADERS}
        receipt = promotions.announce(headers, _body(environ, MAX_BODY_BYTES))
        return 200, receipt.to_dict()

    def healthz(environ: WSGIEnvironment) -> Answer:
        return 200, {"ok": True}

    def slack_elsewhere(environ: WSGIEnvironment) -> Answer:
        return slack_off

    routes: dict[str, dict[str, Callable[[WSGIEnvironment], Answer]]] = {
        "/webhooks/mlflow": {"POST": mlflow_webhook},
        "/healthz": {"GET": healthz},
        "/slack/events": {"POST": slack_elsewhere},
    }

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if slack is not None and environ.get("PATH_INFO") == SLACK_PATH:
            return slack(environ, start_response)
        if environ.get("PATH_INFO") == METRICS_PATH and environ["REQUEST_METHOD"] == "GET":
            exposition = metrics.exposition()
            start_response("200 OK", [("Content-Type", metrics.content_type), ("Content-Length", str(len(exposition)))])
            return [exposition]
        methods = routes.get(environ.get("PATH_INFO", ""))
        if methods is None:
            status, document = 404, {"error": f"no route {environ.get('PATH_INFO')}; see trainbot serve --help"}
        elif (route := methods.get(environ["REQUEST_METHOD"])) is None:
            status, document = 405, {"error": f"use {' or '.join(methods)}"}
        else:
            status, document = _answer(route, environ, metrics)
        body = json.dumps(document).encode()
        start_response(
            f"{status} {HTTPStatus(status).phrase}",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]

    def measured(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started, path = time.perf_counter(), environ.get("PATH_INFO", "")
        statuses: list[str] = []

        def recording(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            statuses.append(status.split(" ", 1)[0])
            return start_response(status, headers, exc_info)

        body = app(environ, recording)
        route = path if path in routes or path == METRICS_PATH else "other"
        metrics.requests.labels(route=route, status=statuses[-1] if statuses else "none").inc()
        if path == SLACK_PATH and slack is not None:
            metrics.ack_seconds.observe(time.perf_counter() - started)
        return body

    return measured


def _answer(route: Callable[[WSGIEnvironment], Answer], environ: WSGIEnvironment, metrics: Metrics) -> Answer:
    try:
        return route(environ)
    except BodyRefused as error:
        return error.status, {"error": str(error)}
    except ActionError as error:
        return ERROR_STATUS.get(type(error), 400), {"error": str(error)}
    except Exception:
        incident = uuid.uuid4().hex[:12]
        metrics.incident("http")
        log.exception("incident %s on %s %s", incident, environ["REQUEST_METHOD"], environ.get("PATH_INFO"))
        return 500, {"error": f"trainbot failed on this request; incident {incident} is in its log"}


def _body(environ: WSGIEnvironment, limit: int) -> bytes:
    length = environ.get("CONTENT_LENGTH", "")
    if not length.isdigit():
        raise BodyRefused(411, "send a Content-Length")
    if int(length) > limit:
        raise BodyRefused(413, f"the body is {length} bytes; at most {limit} are taken")
    return environ["wsgi.input"].read(int(length))


def _cgi_name(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # socketserver's default backlog of 5 resets connections when Slack sends a burst.
    request_queue_size = 128


class _LoggingHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


@contextmanager
def in_thread(server: socketserver.BaseServer) -> Iterator[str]:
    """Serve `server` from a daemon thread until the block ends; yields its base URL."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serve(app: WSGIApplication, host: str, port: int, ready: Callable[[str], None] = print) -> None:
    with make_server(host, port, app, server_class=_ThreadingServer, handler_class=_LoggingHandler) as server:
        ready(f"trainbot serving on http://{host}:{server.server_port}")
        server.serve_forever()


def serve_everything(settings: Settings, host: str, port: int, socket_mode: bool = False) -> None:
    """`trainbot serve`: promotions' webhooks always; Slack (and its notice poster) once configured, over
    HTTP or, with `socket_mode`, over Socket Mode."""
    if socket_mode:
        check_socket_mode_settings(settings)
    from bot.model_commands import promotions_service  # noqa: PLC0415 - MLflow and SQLAlchemy load here

    promotions = promotions_service(settings)
    metrics = Metrics()
    if socket_mode:
        connect_socket_mode(settings, start_slack(settings, promotions, metrics), metrics)
        serve(make_app(promotions, None, metrics, SLACK_OVER_SOCKET_MODE), host, port)
        return
    slack = None
    if settings.slack_signing_secret.get_secret_value() and settings.slack_bot_token.get_secret_value():
        from slack_bolt.adapter.wsgi import SlackRequestHandler  # noqa: PLC0415 - Bolt loads only for Slack

        slack = SlackRequestHandler(start_slack(settings, promotions, metrics).app)
    else:
        log.warning("Slack is off: set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN (--socket-mode: SLACK_APP_TOKEN too)")
    serve(make_app(promotions, slack, metrics), host, port)


def start_slack(settings: Settings, promotions: Promotions, metrics: Metrics) -> SlackBot:
    """The Bolt app, with its notice poster and job watcher started."""
    from bot.job_watcher import start_job_watcher  # noqa: PLC0415 - Bolt loads only for Slack
    from bot.slack_app import build_slack_app  # noqa: PLC0415
    from bot.slack_notices import start_notice_poster  # noqa: PLC0415

    bot = build_slack_app(settings, promotions, metrics)
    if channel := settings.promotions_channel or settings.alerts_channel:
        start_notice_poster(bot.poster, promotions, channel)
    start_job_watcher(bot.train.jobs(), bot.train.threads())
    return bot


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
