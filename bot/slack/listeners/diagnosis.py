"""A diagnosis in Slack: the message, then in its thread the chart and (when no published runbook can be
linked) each runbook's first part as a message with the whole page as a file; and the "Show evidence"
button, which posts every finding's quotes there.

The button carries the key of the kept bundle, not the evidence: the diagnosis is a pure function of the
bundle, so a click diagnoses it again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slack_bolt import App
from slack_sdk import WebClient

from actions.state.posts import Post
from bot.render.blocks import mrkdwn
from bot.render.diagnosis_view import EVIDENCE_ACTION, diagnosis_message, evidence_message, runbook_posts

if TYPE_CHECKING:
    from bot.services import Services
    from bot.slack.acked_work import AckedWork, Work
    from bot.slack.attempts import Attempt
    from bot.slack.poster import SlackPoster
    from diagnosers.engine import Diagnosis

# The diagnosis kept under an evidence key, or None when it is gone.
Load = Callable[[str], "Diagnosis | None"]
GONE = "The evidence behind this diagnosis is no longer kept; diagnose the job again to see it."


def post_diagnosis(
    poster: SlackPoster,
    channel: str,
    thread: Post | None,
    diagnosis: Diagnosis,
    bundle: Path,
    *,
    job: str,
    runbook_base_url: str,
    evidence_key: str,
) -> None:
    """Post the diagnosis in `channel` (in `thread` when given); the chart and the runbooks follow under it."""
    message = diagnosis_message(diagnosis, job=job, runbook_base_url=runbook_base_url, evidence_key=evidence_key)
    posted = poster.post(channel, message, thread=thread)
    under = thread or posted
    from bot.render.charts import diagnosis_chart  # noqa: PLC0415 - the diagnosers load on the first diagnosis, not at start

    chart = diagnosis_chart(bundle)
    if chart is not None:
        poster.upload(channel, chart, filename=f"{job}-diagnosis.png", title=f"Diagnosis of {job}", thread=under)
    if not runbook_base_url:
        for runbook in runbook_posts(diagnosis):
            poster.post(channel, runbook.message, thread=under)
            page = runbook.runbook
            poster.upload(channel, page.page, filename=page.filename, title=f"Runbook: {page.title}", thread=under)


def post_evidence(poster: SlackPoster, thread: Post, diagnosis: Diagnosis, name: str) -> None:
    """Every finding's quotes in `thread`: as a message, or as a text file when they do not fit in one."""
    message = evidence_message(diagnosis)
    if message is not None:
        poster.post(thread.channel, message, thread=thread)
        return
    from bot.render.report import render_text  # noqa: PLC0415

    text = render_text(diagnosis, quote_chars=None)
    poster.upload(thread.channel, text, filename=f"{name}-evidence.txt", title="Evidence", thread=thread)


def kept_diagnoses(services: Services) -> Load:
    """The diagnosis of the bundle kept under a key on the services' shelf, made again; None when it is gone."""

    def load(key: str) -> Diagnosis | None:
        from actions.evidence.diagnosing import diagnose_kept  # noqa: PLC0415 - the rules load on first use

        return diagnose_kept(services.settings, services.bundle_shelf, key)

    return load


def register_diagnosis_actions(app: App, work: AckedWork, poster: SlackPoster, load: Load, attempt: Attempt) -> None:
    app.action(EVIDENCE_ACTION)(work.listener(_evidence_clicked(poster, load, attempt)))


def _evidence_clicked(poster: SlackPoster, load: Load, attempt: Attempt) -> Work:
    """Show evidence: the quotes go in the diagnosis's thread; a key whose bundle is gone, said to the clicker."""

    def show(body: dict[str, Any], client: WebClient) -> None:
        user, channel, key = body["user"]["id"], body["channel"]["id"], body["actions"][0]["value"]
        clicked = body["message"]
        thread = Post(channel, clicked.get("thread_ts") or clicked["ts"])

        def tell(text: str) -> None:
            client.chat_postEphemeral(channel=channel, user=user, text=mrkdwn(text))

        def work() -> None:
            diagnosis = load(key)
            if diagnosis is None:
                tell(GONE)
            else:
                post_evidence(poster, thread, diagnosis, key)

        attempt(work, tell, body)

    return show
