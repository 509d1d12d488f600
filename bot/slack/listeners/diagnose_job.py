"""Diagnosing a job from Slack (`/train diagnose JOB`, the sweep's "Diagnose" button, a failed job's
thread): collect its evidence, keep the bundle on the shelf, diagnose it, post the result in the job's
thread (or the channel, for a job without one).

Collecting takes up to the collect deadline (60 s by default), so it runs on a pool of its own: the
listener threads that answer Slack stay free.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from actions.errors import BadRequest
from actions.jobs.backends import KUBERAY
from bot.render.blocks import Message, mrkdwn, notice
from bot.slack.job_threads import thread_key

if TYPE_CHECKING:
    from actions.settings import Settings
    from actions.state.posts import Post
    from bot.services import Services
    from bot.slack.poster import SlackPoster

DIAGNOSIS_WORKERS = 1
# (work, tell) -> None: run `work`, telling the person what went wrong (bot/slack/attempts.py's attempt_work).
Attempt = Callable[[Callable[[], None], Callable[[str], None]], None]


class JobDiagnoses:
    def __init__(self, services: Services, poster: SlackPoster, attempt: Attempt) -> None:
        self.services = services
        self.settings = services.settings
        self.poster = poster
        self.attempt = attempt
        self._pool = ThreadPoolExecutor(DIAGNOSIS_WORKERS, thread_name_prefix="diagnosis")

    def request(self, job: str, channel: str, user: str) -> Message:
        """Start diagnosing `job` for `user`; what to tell them now."""
        from bot.commands.diagnose import is_bundle_path  # noqa: PLC0415

        if is_bundle_path(job):  # a path on the bot's machine is not for Slack users to read
            raise BadRequest(f"{job}: name a job here; for a bundle file run `trainbot diagnose {job}` in a terminal")
        name = self.services.jobs.name_of(job)
        thread = self.poster.find(thread_key(name))

        def tell(text: str) -> None:
            self.poster.client.chat_postEphemeral(channel=channel, user=user, text=mrkdwn(text))

        self._pool.submit(self.attempt, lambda: self.diagnose(name, channel, thread), tell)
        where = "its thread" if thread else "this channel"
        return notice(f"Diagnosing {name}: collecting its evidence; the diagnosis follows in {where}.")

    def into_thread(self, name: str, thread: Post) -> None:
        """A job failed, or an alert about it opened a thread: its diagnosis goes there, unasked."""

        def tell(text: str) -> None:  # nobody asked: the thread hears why there is no diagnosis
            self.poster.post(thread.channel, notice(f"No diagnosis of {name}: {text}"), thread=thread)

        self._pool.submit(self.attempt, lambda: self.diagnose(name, thread.channel, thread), tell)

    def into_alert_thread(self, job: str, namespace: str, thread: Post) -> None:
        """An alert about `job` (in `namespace`, when its labels say) opened a thread: its diagnosis goes there."""
        self.into_thread(alerted_job(self.settings, job, namespace), thread)

    def diagnose(self, name: str, channel: str, thread: Post | None) -> None:
        from actions.evidence.diagnosing import diagnose_job  # noqa: PLC0415 - collectors load on first use
        from bot.slack.listeners.diagnosis import post_diagnosis  # noqa: PLC0415 - matplotlib loads on first use

        diagnosed = diagnose_job(self.settings, self.services.jobs, name, self.services.bundle_shelf)
        kept = diagnosed.kept
        assert kept is not None  # diagnosed with a shelf
        post_diagnosis(
            self.poster, channel, thread, diagnosed.diagnosis, kept.folder,
            job=name, runbook_base_url=self.settings.runbook_base_url, evidence_key=kept.key,
        )  # fmt: skip


def alerted_job(settings: Settings, job: str, namespace: str) -> str:
    """What to diagnose for an alert about `job` in `namespace`: on KubeRay, a RayJob outside the bot's own
    namespace is `namespace/job`, as `trainbot diagnose` takes it, never a namesake in the bot's namespace.
    Local jobs have no namespace."""
    if settings.backend == KUBERAY and namespace and namespace != settings.namespace:
        return f"{namespace}/{job}"
    return job
