"""A thread per job launched from Slack: the launch message is its parent, each state change is a reply
and edits the parent's status line; a sweep keeps one progress message in its thread, edited as trials
finish, and gets its results with "Promote best to staging" and "Diagnose" when it ends.

Each change is told once, whichever watcher saw it first and whoever asked for the status meanwhile:
what a thread last showed is kept in the state store (SlackPosts.show).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from actions.jobs.job import JobState, JobStatus
from actions.state.posts import Post
from bot.render.blocks import Message, clip, render
from bot.render.job_view import sweep_summary

if TYPE_CHECKING:
    from actions.jobs.records import JobRecord
    from actions.jobs.service import Jobs
    from actions.jobs.sweep_progress import SweepProgress
    from actions.settings import Settings
    from bot.slack.poster import SlackPoster

log = logging.getLogger(__name__)

BAR_WIDTH = 20
RESULTS_SHOWN = 10
PROMOTE_BEST_TO = "staging"
THREAD_PREFIX = "job:"
MESSAGE_CHARS = 300
ICONS = {
    JobState.PENDING: ":hourglass_flowing_sand:",
    JobState.RUNNING: ":arrow_forward:",
    JobState.SUCCEEDED: ":white_check_mark:",
    JobState.FAILED: ":x:",
    JobState.STOPPED: ":black_square_for_stop:",
}
# Called with the job's name and its thread when a job fails: the diagnosis goes there.
OnFailure = Callable[[str, Post], None]


class JobThreads:
    def __init__(
        self, poster: SlackPoster, jobs: Jobs, settings: Settings, on_failure: OnFailure | None = None
    ) -> None:
        self.poster = poster
        self.jobs = jobs
        self.settings = settings
        self.on_failure = on_failure
        # The progress text each sweep's message shows: an edit only when it would change.
        self._progress: dict[str, str] = {}

    def open(self, channel: str, record: JobRecord) -> Post:
        """Post the launch message that heads the job's thread."""
        post = self.poster.post(channel, self.parent(record, record), key=thread_key(record.name))
        self.poster.posts.show(thread_key(record.name), record.state)
        if record.kind == "sweep":
            progress = self.progress_message(record, None)
            self.poster.post(channel, progress, key=progress_key(record.name), thread=post)
            self._progress[record.name] = progress.text
        return post

    def observed(self, status: JobStatus) -> None:
        """A status a watcher saw: told in the job's thread if it changed what the thread shows."""
        key = thread_key(status.name)
        parent = self.poster.find(key)
        record = self.jobs.recorded(status.name)
        if parent is None or record is None or not self.poster.posts.show(key, status.state):
            return
        self.poster.update(key, self.parent(record, status))
        said = first_line(status.message)
        line = f"{ICONS[status.state]} {status.name} is {status.state}" + (f": {said}" if said else "")
        self.poster.post(parent.channel, render("notice", line, message=line), thread=parent)
        if record.kind == "sweep":
            self.sweep_progressed(record, final=status.state.terminal)
        if status.state == JobState.FAILED and self.on_failure:
            self.on_failure(record.name, parent)

    def catch_up(self) -> None:
        """Tell in each unfinished thread what the store knows and the thread does not show yet: a change
        recorded while no watcher ran, or by someone reading the job's status."""
        ended = [state.value for state in JobState if state.terminal]
        for key in self.poster.posts.showing_other_than(THREAD_PREFIX, ended):
            name = key.removeprefix(THREAD_PREFIX)
            if (record := self.jobs.recorded(name)) is not None:
                self.observed(record)

    def sweeps_progressed(self) -> None:
        """Edit the progress message of every running sweep that has a thread."""
        for record in self.jobs.list(active=True, limit=100):
            if record.kind == "sweep" and self.poster.find(thread_key(record.name)) is not None:
                self.sweep_progressed(record)

    def sweep_progressed(self, record: JobRecord, final: bool = False) -> None:
        """Edit the sweep's progress message if its numbers moved; at the end, post the results."""
        from actions.jobs.planning import sweep_experiment  # noqa: PLC0415
        from actions.jobs.sweep_progress import sweep_progress  # noqa: PLC0415 - MLflow loads on first use

        trials = int(record.params.get("trials", 0))
        progress = sweep_progress(self.settings.tracking_uri(), sweep_experiment(record.template), record.name, trials)
        message = self.progress_message(record, progress)
        if self._progress.get(record.name) != message.text:
            self.poster.update(progress_key(record.name), message)
            self._progress[record.name] = message.text
        if final and self.poster.posts.show(results_key(record.name), "posted"):
            self.poster.reply(thread_key(record.name), results_message(record, progress))

    def parent(self, record: JobRecord, status: JobStatus) -> Message:
        text = f"{status.name}: {status.state}"
        params = [f"{key}={value}" for key, value in record.params.items()]
        # Recorded by name; in Slack a person with a known user id is mentioned, which Slack shows as their name.
        requester = self.jobs.people.slack_id(record.requester)
        return render(
            "job", text, record=record, requester=requester, state=str(status.state), icon=ICONS[status.state],
            params=params, message=first_line(status.message),
        )  # fmt: skip

    def progress_message(self, record: JobRecord, progress: SweepProgress | None) -> Message:
        trials = int(record.params.get("trials", 0))
        if progress is None or not progress.runs:
            return render(
                "notice", f"{record.name}: waiting for its first trial", message="Waiting for the first trial"
            )
        summary = sweep_summary(progress, trials)
        filled = round(BAR_WIDTH * summary.done / trials) if trials else 0
        bar = "█" * filled + "░" * (BAR_WIDTH - filled)
        return render(
            "sweep_progress", f"{record.name}: {summary}", bar=bar, done=summary.done, trials=trials,
            running=summary.running, best=summary.best,
        )  # fmt: skip


def results_message(record: JobRecord, progress: SweepProgress) -> Message:
    ranked = progress.ranked()[:RESULTS_SHOWN]
    rows = [
        f"{rank}. {run.name}  {progress.metric}={run.value:.4g}  "
        + " ".join(f"{key}={value}" for key, value in sorted(run.params.items()))
        for rank, run in enumerate(ranked, start=1)
    ]
    offer = (
        json.dumps({"model": progress.model, "version": int(progress.version), "target": PROMOTE_BEST_TO})
        if progress.version
        else ""
    )
    text = f"{record.name}: {progress.finished} of {progress.trials} trials finished" + (
        f"; best {progress.model} v{progress.version}" if progress.version else "; no model registered"
    )
    return render(
        "sweep_results", text, job=record.name, rows=rows, offer=offer, target=PROMOTE_BEST_TO,
        model=progress.model, version=progress.version, finished=progress.finished, trials=progress.trials,
        metric=progress.metric,
    )  # fmt: skip


def first_line(message: str) -> str:
    """A status message fit for a line: Ray's can hold 20,000 characters of the job's log."""
    return clip(message.strip().split("\n", 1)[0], MESSAGE_CHARS)


def thread_key(job: str) -> str:
    return f"{THREAD_PREFIX}{job}"


def progress_key(job: str) -> str:
    return f"sweep-progress:{job}"


def results_key(job: str) -> str:
    return f"sweep-results:{job}"
