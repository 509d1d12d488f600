"""`trainbot serve`: trainbot's HTTP endpoints, one WSGI app.

POST /slack/events goes to the slack-bolt App (bot/slack/app.py) when Slack is configured (with --socket-mode
Slack comes over a WebSocket the bot opens instead, bot/slack/socket_mode.py, and that route says so); POST
/webhooks/mlflow takes MLflow's registry webhooks (checked in bot/web/mlflow_webhook.py, handled in
actions/promotions/service.py); POST /alerts/alertmanager takes Alertmanager's webhook (read in
bot/web/alertmanager_webhook.py, recorded by actions/alerts/threads.py, posted by bot/slack/alert_poster.py); GET
/healthz answers while the process serves; GET /metrics is the bot's own (bot/http/metrics.py).
bot/http/server.py serves it.
Each route parses the request, calls one action and renders JSON; an error a sender can fix gets its
status and message, anything else (a route's or Bolt's failure) the request's id as an incident.
"""

from __future__ import annotations

import gc
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from actions.errors import ActionError, BadRequest, Unauthorized, Unavailable
from bot.http.metrics import Metrics
from bot.http.server import NO_WORK, BodyRefused, Limits, escaped, json_answer, log_answer, serve
from bot.incidents import record_incident
from bot.web.alertmanager_webhook import request_notification
from bot.web.mlflow_webhook import request_delivery

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

    from actions.alerts.threads import AlertThreads
    from actions.promotions.service import Promotions
    from bot.services import Services
    from bot.slack.app import SlackBot

log = logging.getLogger(__name__)

Answer = tuple[int, dict[str, Any]]
SLACK_PATH = "/slack/events"
ALERTS_PATH = "/alerts/alertmanager"
# What /slack/events answers when no Bolt handler serves it.
SLACK_NOT_CONFIGURED: Answer = (
    503,
    {"error": "Slack is not configured: set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN"},
)
SLACK_OVER_SOCKET_MODE: Answer = (
    404,
    {"error": "this trainbot takes Slack over Socket Mode (trainbot serve --socket-mode), not at /slack/events"},
)
METRICS_PATH = "/metrics"
ERROR_STATUS: dict[type[ActionError], int] = {BadRequest: 400, Unauthorized: 401, Unavailable: 503}
# Where a request's id waits in its WSGI environ, for the incident that names it.
REQUEST_ID_KEY = "trainbot.request_id"


def make_app(
    promotions: Promotions,
    slack: WSGIApplication | None = None,
    metrics: Metrics | None = None,
    alerts: AlertThreads | None = None,
    slack_off: Answer = SLACK_NOT_CONFIGURED,
) -> WSGIApplication:
    """The router; `slack` is Bolt's WSGI handler, or None when Slack does not come over HTTP (then
    /slack/events answers `slack_off`); `alerts` records Alertmanager's webhook (no route without it)."""
    metrics = metrics or Metrics()

    def mlflow_webhook(environ: WSGIEnvironment) -> Answer:
        delivery = request_delivery(environ, promotions.webhook_secret, promotions.clock())
        return 200, promotions.announce(delivery).to_dict()

    def healthz(environ: WSGIEnvironment) -> Answer:
        return 200, {"ok": True}

    def slack_elsewhere(environ: WSGIEnvironment) -> Answer:
        return slack_off

    routes: dict[str, dict[str, Callable[[WSGIEnvironment], Answer]]] = {
        "/webhooks/mlflow": {"POST": mlflow_webhook},
        "/healthz": {"GET": healthz},
        "/slack/events": {"POST": slack_elsewhere},
    }
    if alerts is not None:

        def alertmanager_webhook(environ: WSGIEnvironment) -> Answer:
            return 200, alerts.record(request_notification(environ), datetime.now(UTC)).to_dict()

        routes[ALERTS_PATH] = {"POST": alertmanager_webhook}

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
            status, document = _answer(route, environ)
        return json_answer(start_response, status, document)

    def measured(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started, path = time.perf_counter(), environ.get("PATH_INFO", "")
        request_id = environ[REQUEST_ID_KEY] = uuid.uuid4().hex[:12]
        statuses: list[str] = []

        def recording(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            statuses.append(status.split(" ", 1)[0])
            return start_response(status, [*headers, ("X-Request-Id", request_id)], exc_info)

        try:
            body = app(environ, recording)
        except Exception:
            # Any route's or Bolt's failure: its traceback in the log under the request's id, never to the client.
            record_incident(_escaped_path(environ), count=lambda: metrics.incident("http"), incident_id=request_id)
            incident = {"error": f"trainbot failed on this request; incident {request_id} is in its log"}
            body = json_answer(recording, 500, incident)
        status = statuses[-1] if statuses else "none"
        metrics.answered(path if path in routes or path == METRICS_PATH else "other", status)
        size = int(environ["CONTENT_LENGTH"]) if environ.get("CONTENT_LENGTH", "").isdigit() else 0
        log_answer(request_id, environ.get("REQUEST_METHOD", ""), path, status, size, started)
        if path == SLACK_PATH and slack is not None:
            metrics.ack_seconds.observe(time.perf_counter() - started)
        return body

    return measured


def _answer(route: Callable[[WSGIEnvironment], Answer], environ: WSGIEnvironment) -> Answer:
    try:
        return route(environ)
    except BodyRefused as error:
        return error.status, {"error": str(error)}
    except ActionError as error:
        return ERROR_STATUS.get(type(error), 400), {"error": str(error)}


def _escaped_path(environ: WSGIEnvironment) -> str:
    return escaped(f"{environ.get('REQUEST_METHOD', '')} {environ.get('PATH_INFO', '')}")


def serve_everything(services: Services, host: str, port: int, limits: Limits, socket_mode: bool = False) -> int:
    """`trainbot serve`: promotions' and Alertmanager's webhooks always; Slack (and its posters) once configured,
    over HTTP or, with `socket_mode`, over Socket Mode. Until SIGTERM; the acked Slack work left undone then."""
    metrics = Metrics()
    app, bot = start_everything(services, socket_mode, metrics)
    # The start-up heap (Bolt, SQLAlchemy, Alembic, the Kubernetes client...) lives as long as the process: out
    # of the collector's reach, a full collection scans what requests made, not 55 ms of modules, which
    # otherwise stalled every thread twice a run of bench/ack_latency.py. Start-up's garbage goes first.
    gc.collect()
    gc.freeze()
    return serve(app, host, port, limits, metrics, drain=bot.work.drain if bot else NO_WORK)


def start_everything(
    services: Services, socket_mode: bool = False, metrics: Metrics | None = None
) -> tuple[WSGIApplication, SlackBot | None]:
    """The WSGI app of every endpoint, with the Slack bot and its background threads started when Slack is
    configured; the bot too, for the console."""
    from bot.web.lease_sweeper import start_lease_sweeper  # noqa: PLC0415

    settings = services.settings
    if socket_mode:
        from bot.slack.socket_mode import check_socket_mode_settings  # noqa: PLC0415

        check_socket_mode_settings(settings)
    promotions, alerts = services.promotions, services.alert_threads
    start_lease_sweeper(promotions, settings.promotion_sweep_s)
    metrics = metrics or Metrics()
    if socket_mode:
        from bot.slack.socket_mode import connect_socket_mode  # noqa: PLC0415

        bot = start_slack(services, metrics)
        connect_socket_mode(settings, bot, metrics)
        return make_app(promotions, None, metrics, alerts, SLACK_OVER_SOCKET_MODE), bot
    if not (settings.slack_signing_secret.get_secret_value() and settings.slack_bot_token.get_secret_value()):
        log.warning("Slack is off: set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN (--socket-mode: SLACK_APP_TOKEN too)")
        return make_app(promotions, None, metrics, alerts), None
    from slack_bolt.adapter.wsgi import SlackRequestHandler  # noqa: PLC0415 - Bolt loads only for Slack

    from bot.slack.entry import slack_entry  # noqa: PLC0415

    bot = start_slack(services, metrics)
    entry = slack_entry(SlackRequestHandler(bot.app), settings.slack_signing_secret.get_secret_value())
    return make_app(promotions, entry, metrics, alerts), bot


def start_slack(services: Services, metrics: Metrics) -> SlackBot:
    """The Bolt app, with its notice poster, job watcher and alert poster started."""
    from bot.slack.app import build_slack_app  # noqa: PLC0415
    from bot.slack.job_watcher import start_job_watcher  # noqa: PLC0415 - Bolt loads only for Slack
    from bot.slack.notices import start_notice_poster  # noqa: PLC0415

    settings = services.settings
    bot = build_slack_app(services, metrics)
    if channel := settings.promotions_channel or settings.alerts_channel:
        start_notice_poster(bot.poster, services.promotions, channel)
    start_job_watcher(services.jobs, bot.train.threads())
    _start_alert_threads(services, bot)
    return bot


def _start_alert_threads(services: Services, bot: SlackBot) -> None:
    from bot.slack.alert_poster import AlertPoster, start_alert_poster  # noqa: PLC0415

    settings = services.settings
    if not settings.alerts_channel:
        log.warning("alerts are recorded but not posted: set TRAINBOT_ALERTS_CHANNEL")
        return
    alert_poster = AlertPoster(
        bot.poster, services.alert_threads, settings.alerts_channel, silenceable=bool(settings.alertmanager_url),
        on_thread_opened=bot.train.diagnoses.into_alert_thread,
    )  # fmt: skip
    start_alert_poster(alert_poster)
