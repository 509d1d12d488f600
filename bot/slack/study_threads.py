"""A thread per scaling study asked for in Slack (`/train scale`). The parent message shows the study and its
progress (point k of n, that point's job and state), edited as the points move on; each point's job replies in the
thread when it is launched and when it ends, and opens no thread of its own. When the study ends, the parent shows
its end state, and the thread gets the table (the CLI's text, in a code block; the whole text as a file when it does
not fit) and the chart (when a point was measured).

A study takes minutes, so it runs on a thread of its own, never on the pools that answer Slack. Studies run one at
a time, so two studies' points never compete for the same workers. The thread is a daemon: a bot that stops leaves
the point running then to its backend, and the study's parent says no more.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from actions.errors import NotFound
from actions.jobs.job import JobState, JobStatus
from bot.render.blocks import Message, clip, notice, render
from bot.slack.job_threads import ICONS, first_line

if TYPE_CHECKING:
    from actions.evidence.studying import PointDiagnosis
    from actions.jobs.scaling import PointWatcher, StudyPlan, StudyResult
    from actions.state.posts import Post
    from bot.services import Services
    from bot.slack.poster import SlackPoster

log = logging.getLogger(__name__)

STUDY_PREFIX = "study:"
# The table in one section: Slack's 3,000 characters less the fences.
TABLE_CHARS = 2900
# (work, tell) -> None: run `work`, telling the thread what went wrong (bot/slack/attempts.py's attempt_work).
Attempt = Callable[[Callable[[], None], Callable[[str], None]], None]


class StudyThreads:
    def __init__(self, services: Services, poster: SlackPoster, attempt: Attempt) -> None:
        self.services = services
        self.poster = poster
        self.attempt = attempt
        self._one_at_a_time = threading.Lock()

    def start(self, channel: str, plan: StudyPlan) -> Post:
        """Post the message that heads the study's thread, and run the study behind it (after any study before)."""
        waiting = self._one_at_a_time.locked()
        state, message = (
            ("waiting", "another study runs first; studies run one at a time") if waiting else ("starting", "")
        )
        post = self.poster.post(
            channel, self.parent(plan, ":hourglass_flowing_sand:", state, message), key=study_key(plan.id)
        )
        threading.Thread(target=self._run_in_turn, args=(plan, post), name=f"study-{plan.id}", daemon=True).start()
        return post

    def _run_in_turn(self, plan: StudyPlan, post: Post) -> None:
        def tell(text: str) -> None:  # the study stopped on something unexpected: its thread hears why
            self.poster.post(post.channel, notice(f"{plan.id} stopped: {text}"), thread=post)
            self._stopped(plan.id, text)
            self.poster.update(study_key(plan.id), self.parent(plan, ICONS[JobState.FAILED], "failed", text))

        with self._one_at_a_time:
            try:
                self.attempt(lambda: self.run(plan, post), tell)
            except Exception:  # telling failed too (Slack unreachable): the log is all that is left
                log.exception("scaling study %s stopped and its thread could not be told", plan.id)

    def _stopped(self, study: str, why: str) -> None:
        """The study in the state store ends failed, saying why, rather than running forever; one that stopped
        before it was stored has nothing to end."""
        from actions.jobs.studies import StudyStatus  # noqa: PLC0415 - SQLAlchemy loads with the store

        with contextlib.suppress(NotFound):
            self.services.studies.finish(study, StudyStatus.FAILED, f"stopped: {why}")

    def run(self, plan: StudyPlan, post: Post) -> None:
        """Run the study, telling its thread each point's launch and end; then its end state, table and chart (the
        chart last: whoever waits for it has seen the rest)."""
        from actions.evidence.studying import explain_study  # noqa: PLC0415 - the rules load on first use
        from actions.jobs.scaling import run_study  # noqa: PLC0415
        from bot.render.charts import scale_chart  # noqa: PLC0415 - matplotlib loads on first use
        from bot.render.scale_view import study_text  # noqa: PLC0415

        services = self.services
        result = run_study(services.settings, services.jobs, services.studies, plan, self._points(plan, post))
        icon = ICONS[JobState.RUNNING]
        self.poster.update(study_key(plan.id), self.parent(plan, icon, "diagnosing", "where the curve bends"))
        explained = explain_study(services.settings, services.jobs, result)
        self.poster.update(study_key(plan.id), self.ended(plan, result, explained))
        text = study_text(result, explained)
        title = f"Scaling study {plan.id}: {result.study.status.value}"
        self.poster.post(post.channel, render("code", title, title=title, code=clip(text, TABLE_CHARS)), thread=post)
        if len(text) > TABLE_CHARS:
            self.poster.upload(post.channel, text, filename=f"{plan.id}.txt", title=f"{title} (whole)", thread=post)
        if any(row.measured for row in result.table.rows):  # a chart of no point would be empty axes
            chart = scale_chart(result.table)
            self.poster.upload(
                post.channel, chart, filename=f"{plan.id}.png", title=f"Scaling of {plan.id}", thread=post
            )

    def _points(self, plan: StudyPlan, post: Post) -> PointWatcher:
        """What the study tells of its points: a reply at each point's launch and end, the parent edited at each
        change of state."""
        # Each point's last state told: with --parallel the points are told in turn, poll after poll.
        shown: dict[int, JobState] = {}

        def seen(index: int, points: int, status: JobStatus) -> None:
            if shown.get(index) == status.state:
                return
            launched = index not in shown
            shown[index] = status.state
            launch = plan.launches[index]
            where = f"point {index + 1} of {points}"
            if launched:
                assert plan.template.study is not None  # plan_study checked
                shape = [_workers(launch.workers), f"batch {launch.params[plan.template.study.batch]} a worker"]
                shape += [f"{launch.gpus_per_worker} GPUs a worker"] if launch.gpus_per_worker else []
                self.poster.post(
                    post.channel, notice(f"Launched {status.name}, {where}: {', '.join(shape)}"), thread=post
                )
            message = f"{status.name} ({_workers(launch.workers)}) {status.state}"
            self.poster.update(study_key(plan.id), self.parent(plan, ICONS[status.state], where, message))
            if status.state.terminal:
                said = first_line(status.message)
                line = f"{ICONS[status.state]} {status.name} is {status.state}" + (f": {said}" if said else "")
                self.poster.post(post.channel, notice(line), thread=post)

        return seen

    def ended(self, plan: StudyPlan, result: StudyResult, explained: PointDiagnosis | None) -> Message:
        """The parent at the end: succeeded or failed, the efficiency at each measured size and where it bent."""
        study, table = result.study, result.table
        efficiencies = ", ".join(
            f"{row.efficiency:.2f} at {row.workers}" for row in table.rows if row.efficiency is not None
        )
        bent = (
            f"under {table.threshold:g} from {table.first_below} workers"
            if table.first_below is not None
            else f"at or above {table.threshold:g} at every measured size"
        )
        parts = [
            f"efficiency {efficiencies}, {bent}" if efficiencies else "nothing measured",
            first_line(study.reason).rstrip(":"),
        ]
        if explained is not None:
            parts.append(f"the {explained.workers}-worker point is diagnosed in the thread")
        icon = ICONS[JobState.SUCCEEDED if study.status == "succeeded" else JobState.FAILED]
        return self.parent(plan, icon, study.status.value, "; ".join(part for part in parts if part))

    def parent(self, plan: StudyPlan, icon: str, state: str, message: str) -> Message:
        # The study sets its steps and fixed values itself: the template's defaults for them would mislead.
        study = plan.template.study
        set_by_study = {study.steps, *study.fixed} if study else set()
        text = f"{plan.id}: {state}" + (f", {message}" if message else "")
        return render(
            "study", text, icon=icon, study=plan.id, state=state, message=message, template_name=plan.template.name,
            sizes=", ".join(str(launch.workers) for launch in plan.launches), backend=plan.backend,
            batch=plan.batch_mode, steps=plan.steps, requester=self.services.people.slack_id(plan.requester),
            params=[f"{key}={value}" for key, value in plan.params.items() if key not in set_by_study],
        )  # fmt: skip


def _workers(count: int) -> str:
    return f"{count} worker" + ("" if count == 1 else "s")


def study_key(study: str) -> str:
    return f"{STUDY_PREFIX}{study}"
