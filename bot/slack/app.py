"""The slack-bolt App: every request acked at once, the work done on a bounded pool of listener threads.

Bolt checks every request's signature and its 5-minute timestamp window (401 otherwise). Slash commands
ack with nothing and answer ephemerally through their response_url; buttons and the reject modal act on
promotions and edit the request's message. A mistake a person made gets its message, said only to
them; anything else an incident id, with the traceback in the log only.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slack_bolt import Ack, App
from slack_bolt.error import BoltError
from slack_sdk import WebClient
from slack_sdk.webhook import WebhookClient

from actions.errors import Unavailable
from bot.commands.grammar import Slash
from bot.http.metrics import Metrics
from bot.render.blocks import Message, mrkdwn, render
from bot.slack.acked_work import AckedWork, Work
from bot.slack.attempts import Attempt, attempt_work, tell_privately
from bot.slack.authorization import Authorization
from bot.slack.entry import first_delivery
from bot.slack.job_threads import JobThreads
from bot.slack.lanes import DIAGNOSIS, MLFLOW, always, model_lane, train_lane
from bot.slack.listeners.alerts import register_alert_actions
from bot.slack.listeners.diagnose_job import JobDiagnoses
from bot.slack.listeners.diagnosis import kept_diagnoses, register_diagnosis_actions
from bot.slack.listeners.model import answer_model
from bot.slack.listeners.promotions import PromotionDesk
from bot.slack.listeners.train import TrainDesk, answer_train
from bot.slack.notices import offer_of
from bot.slack.poster import SlackPoster, paced_client
from bot.slack.study_threads import StudyThreads
from bot.slack.user_groups import UserGroups

if TYPE_CHECKING:
    from actions.jobs.service import Jobs
    from bot.services import Services

log = logging.getLogger(__name__)

REJECT_REASON = "promotion_reject_reason"
OFFER_ACTION = "promotion_offer_"
DIAGNOSE_ACTION = "job_diagnose"


@dataclass(frozen=True)
class SlackBot:
    """The Bolt app, the one poster every channel message goes through (its pacing is per process), and the
    pool that does the work behind the acks (drained on a graceful stop)."""

    app: App
    poster: SlackPoster
    train: TrainDesk
    work: AckedWork


def build_slack_app(services: Services, metrics: Metrics | None = None) -> SlackBot:
    """The Bolt app over `services`, every listener registered (posters and watchers start elsewhere)."""
    settings = services.settings
    metrics = metrics or Metrics()
    work = AckedWork(settings.slack_workers, settings.slack_backend_workers, first_delivery(services.seen_signatures))
    metrics.watch_queue(work.waiting)
    token = settings.slack_bot_token.get_secret_value()
    try:
        # Bolt checks the token with auth.test here.
        app = App(
            client=paced_client(token, settings.slack_api_url, settings.read_timeout_s),
            signing_secret=settings.slack_signing_secret.get_secret_value(),
            # Listeners run in the request's own thread and ack at once (otherwise Bolt queues them on a pool
            # and polls for the ack every 10 ms); the work behind the ack goes to `work`'s pool.
            process_before_response=True,
        )
    except (BoltError, OSError) as error:
        raise Unavailable(
            f"Slack at {settings.slack_api_url} did not accept SLACK_BOT_TOKEN ({error}); "
            "check the token, and TRAINBOT_SLACK_API_URL if a proxy stands between"
        ) from None
    poster = SlackPoster(app.client, services.slack_posts)
    groups = UserGroups(app.client)
    authorization = Authorization(settings.slack_commands, services.people)

    def authorize(verb: str, slash: Slash) -> None:
        authorization.check(verb, slash.user, slash.channel, groups.of)

    desk = PromotionDesk(poster, services.promotions, groups)

    def jobs() -> Jobs:  # on first use: SQLAlchemy and the backends load then
        return services.jobs

    attempt = functools.partial(attempt_work, on_incident=lambda: metrics.incident("slack"))
    diagnoses = JobDiagnoses(services, poster, lambda work, tell: attempt(work, tell, {"type": "diagnosis"}))
    threads = functools.cache(lambda: JobThreads(poster, jobs(), settings, on_failure=diagnoses.into_thread))
    studies = StudyThreads(services, poster, lambda work, tell: attempt(work, tell, {"type": "scale study"}))
    train = TrainDesk(settings, jobs, threads, diagnoses, authorize, services.people, studies)
    train_answer = _answering(lambda slash: answer_train(slash, train), attempt)
    app.command("/train")(work.listener(train_answer, lane=train_lane))
    model_answer = _answering(lambda slash: answer_model(slash, desk, authorize), attempt)
    app.command("/model")(work.listener(model_answer, lane=model_lane))
    app.action("promotion_approve")(work.listener(_approve_clicked(desk, attempt), lane=always(MLFLOW)))
    app.action("promotion_reject")(_reject_clicked(desk, attempt))
    reject_submitted = _reject_submitted(desk, attempt)
    app.view(REJECT_REASON)(work.listener(reject_submitted, refusal=_reason_missing, lane=always(MLFLOW)))
    app.action(re.compile(f"^{OFFER_ACTION}"))(work.listener(_offer_taken(desk, attempt), lane=always(MLFLOW)))
    diagnose_clicked = _diagnose_clicked(diagnoses, authorize, attempt)
    app.action(DIAGNOSE_ACTION)(work.listener(diagnose_clicked, lane=always(DIAGNOSIS)))
    register_diagnosis_actions(app, work, poster, kept_diagnoses(services), attempt)
    register_alert_actions(app, work, services, poster, attempt)
    return SlackBot(app, poster, train, work)


def _answering(answer: Callable[[Slash], Message], attempt: Attempt) -> Work:
    """The work behind a slash command's ack: answer it ephemerally, whatever happens."""

    def reply(command: dict[str, Any], client: WebClient) -> None:
        # As Bolt makes a request's `respond` (the command's response_url, through the client's proxy and TLS),
        # with the client's timeout too: Bolt's waits 30 s.
        respond = WebhookClient(command["response_url"], timeout=client.timeout, proxy=client.proxy, ssl=client.ssl)

        def say(message: Message) -> None:
            respond.send(text=message.text, blocks=message.blocks, response_type="ephemeral", replace_original=False)

        slash = Slash(command.get("text", ""), command["user_id"], command.get("channel_id", ""))
        attempt(lambda: say(answer(slash)), lambda text: say(render("error", text, message=text)), command)

    return reply


def _approve_clicked(desk: PromotionDesk, attempt: Attempt) -> Work:
    def approve(body: dict[str, Any], client: WebClient) -> None:
        user, request_id = body["user"]["id"], body["actions"][0]["value"]
        attempt(
            lambda: desk.refresh(desk.promotions.approve(desk.actor(user), request_id)),
            tell_privately(client, body["channel"]["id"], user),
            body,
        )

    return approve


def _offer_taken(desk: PromotionDesk, attempt: Attempt) -> Work:
    """A "Request <target>" button under a new version: the clicker asks, as with /model promote."""

    def request(body: dict[str, Any], client: WebClient) -> None:
        user, channel = body["user"]["id"], body["channel"]["id"]
        model, version, target = offer_of(body["actions"][0]["value"])
        attempt(
            lambda: desk.ask(channel, desk.promotions.request(desk.actor(user), model, version, target)),
            tell_privately(client, channel, user),
            body,
        )

    return request


def _diagnose_clicked(diagnoses: JobDiagnoses, authorize: Callable[[str, Slash], None], attempt: Attempt) -> Work:
    """A sweep's "Diagnose" button: as `/train diagnose JOB` typed by the clicker."""

    def diagnose(body: dict[str, Any], client: WebClient) -> None:
        user, channel, job = body["user"]["id"], body["channel"]["id"], body["actions"][0]["value"]
        tell = tell_privately(client, channel, user)

        def work() -> None:
            authorize("diagnose", Slash(f"diagnose {job}", user, channel))
            tell(diagnoses.request(job, channel, user).text)

        attempt(work, tell, body)

    return diagnose


def _reject_clicked(desk: PromotionDesk, attempt: Attempt) -> Callable[..., None]:
    """Open the modal that asks why, for an approver; a trigger_id lasts 3 s, so this is not lazy."""

    def reject(ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        ack()
        user, request_id = body["user"]["id"], body["actions"][0]["value"]

        def open_modal() -> None:
            request = desk.promotions.decidable(desk.actor(user), request_id)
            client.views_open(trigger_id=body["trigger_id"], view=desk.reject_modal(request))

        attempt(open_modal, tell_privately(client, body["channel"]["id"], user), body)

    return reject


def _reason_missing(body: dict[str, Any]) -> dict[str, Any] | None:
    """The reject modal's answer when its reason is blank: the field's error, and the modal stays open."""
    if _reason(body["view"]):
        return None
    return {"response_action": "errors", "errors": {"reason": "Say why it is rejected."}}


def _reject_submitted(desk: PromotionDesk, attempt: Attempt) -> Work:
    def reject(body: dict[str, Any], client: WebClient) -> None:
        view = body["view"]
        user, request_id = body["user"]["id"], view["private_metadata"]
        attempt(
            lambda: desk.refresh(desk.promotions.reject(desk.actor(user), request_id, _reason(view))),
            # A modal has no channel: the person hears back in a direct message.
            lambda text: client.chat_postMessage(channel=user, text=mrkdwn(text)),
            body,
        )

    return reject


def _reason(view: dict[str, Any]) -> str:
    return (view["state"]["values"]["reason"]["reason"].get("value") or "").strip()
