"""A scaling study: one template launched at each size in turn (launch, wait, measure, next), set in a table.

Each point runs `steps` measured steps after a warm-up. The warm-up is the first tenth of each rank's steps, which
the rules already leave out (diagnosers.rules.measures.WARMUP_SHARE): a point runs ceil(steps / 0.9) steps in all,
so at least `steps` of them are measured. `--batch per-worker` keeps each worker's batch (weak scaling); `global`
keeps the batch as given and divides it over the workers (strong scaling). A point that fails, or measures
nothing, ends the study: the table holds what was measured up to there.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from actions.errors import ActionError, BadRequest
from actions.jobs.job import JobState, JobStatus, Launch, new_job_name
from actions.jobs.planning import templates_of, training_launch
from actions.jobs.service import Jobs
from actions.jobs.studies import BATCH_MODES, BatchMode, NewStudy, Study, StudyStatus, StudyStore
from actions.jobs.templates import JobTemplate, ParamValue, StudyParams, find_template
from actions.people import People
from actions.settings import Settings
from diagnosers.bundle import NotABundle, load_bundle
from diagnosers.rules.measures import WARMUP_SHARE
from diagnosers.scaling import ScalePoint, ScaleTable, scale_table
from diagnosers.study import scale_point

DEFAULT_STEPS = 40
MAX_STEPS = 100_000
MAX_SIZES = 8
POLL_S = 2.0


@dataclass(frozen=True)
class ScaleRequest:
    """A study of `template` (with `key=value` words as `params`) at each of `sizes` workers."""

    template: str
    params: tuple[str, ...]
    requester: str
    sizes: tuple[int, ...]
    gpus_per_worker: int | None = None
    batch_mode: BatchMode = "per-worker"
    steps: int = DEFAULT_STEPS
    backend: str | None = None


@dataclass(frozen=True)
class StudyPlan:
    """What a study will launch, every size checked before any runs: one launch a size, smallest first."""

    id: str
    template: JobTemplate
    requester: str
    params: dict[str, ParamValue]  # as asked: the batch is the per-worker or the global one, as batch_mode says
    launches: tuple[Launch, ...]
    batch_mode: BatchMode
    steps: int
    backend: str


@dataclass(frozen=True)
class StudyResult:
    """The study as stored, each launched size as measured, and the table of them."""

    study: Study
    points: tuple[ScalePoint, ...]
    table: ScaleTable
    ended_at: int | None = None  # the index (in sizes) of the point that ended a failed study

    def to_dict(self) -> dict[str, Any]:
        return {"study": self.study.to_dict(), "table": self.table.to_dict(), "ended_at": self.ended_at}


# Told each status a point's job is seen in: (the point's index, the study's number of points, its status).
PointWatcher = Callable[[int, int, JobStatus], None]


def total_steps(measured: int) -> int:
    """Steps a point runs so that at least `measured` remain after the rules leave out the warm-up."""
    return math.ceil(measured / (1 - WARMUP_SHARE))


def plan_study(settings: Settings, request: ScaleRequest, people: People | None = None) -> StudyPlan:
    """The study `request` asks for; every problem a person can cause is a BadRequest here, before any launch."""
    people = people or People(settings.people)
    requester = people.name(request.requester)
    template = find_template(templates_of(settings), request.template)
    template.authorize(requester, people)
    if template.study is None:
        raise BadRequest(
            f"template {template.name} declares no `study` (its batch and steps parameters): it cannot be studied"
        )
    sizes = sorted(set(request.sizes))
    if not 2 <= len(sizes) <= MAX_SIZES:
        raise BadRequest(
            f"--workers {','.join(map(str, request.sizes))}: give 2 to {MAX_SIZES} sizes, e.g. --workers 1,2,4"
        )
    if request.batch_mode not in BATCH_MODES:
        raise BadRequest(f"--batch {request.batch_mode}: choose {' or '.join(BATCH_MODES)}")
    if not 1 <= request.steps <= MAX_STEPS:
        raise BadRequest(f"--steps {request.steps}: choose 1 to {MAX_STEPS}")
    _refuse_study_set(template.study, request.params)
    params = template.parse_params(list(request.params))
    batch = params.get(template.study.batch)
    if not isinstance(batch, int):
        raise BadRequest(f"give the batch: {template.study.batch}=N")
    study = new_job_name(f"{template.name}-scale")
    launches = tuple(
        replace(_point(template, params, batch, workers, request, requester), study=study) for workers in sizes
    )
    return StudyPlan(
        id=study,
        template=template,
        requester=requester,
        params=params,
        launches=launches,
        batch_mode=request.batch_mode,
        steps=request.steps,
        backend=request.backend or settings.backend,
    )


def _refuse_study_set(study: StudyParams, words: tuple[str, ...]) -> None:
    """A study sets its steps and fixed values itself: a person's own value for them would be silently overridden."""
    for word in words:
        key = word.partition("=")[0]
        if key == study.steps:
            raise BadRequest(f"{key} is set by --steps in a study; drop {word}")
        if key in study.fixed:
            raise BadRequest(f"a study runs with {key}={study.fixed[key]}; drop {word}")


def _point(
    template: JobTemplate,
    params: dict[str, ParamValue],
    batch: int,
    workers: int,
    request: ScaleRequest,
    requester: str,
) -> Launch:
    assert template.study is not None  # plan_study checked
    study = template.study
    per_worker = batch
    if request.batch_mode == "global":
        if batch % workers:
            raise BadRequest(
                f"--batch global: {study.batch}={batch} does not divide over {workers} workers; "
                "give a global batch every size divides"
            )
        per_worker = batch // workers
    chosen = {**params, **study.fixed, study.steps: total_steps(request.steps), study.batch: per_worker}
    for key in (study.batch, study.steps, *study.fixed):
        template.params[key].check(key, chosen[key])  # within the template's bounds, as if typed
    return training_launch(template, chosen, template.size(workers, request.gpus_per_worker), requester)


def run_study(
    settings: Settings,
    jobs: Jobs,
    studies: StudyStore,
    plan: StudyPlan,
    watcher: PointWatcher | None = None,
    poll_s: float = POLL_S,
) -> StudyResult:
    """Run the plan's points one after another, each measured when its job ends; a point that fails or measures
    nothing ends the study there."""
    study = studies.create(
        NewStudy(
            id=plan.id,
            template=plan.template.name,
            requester=plan.requester,
            backend=plan.backend,
            params=dict(plan.params),
            sizes=tuple(launch.workers for launch in plan.launches),
            gpus_per_worker=plan.launches[0].gpus_per_worker,
            batch_mode=plan.batch_mode,
            steps=plan.steps,
        )
    )
    points: list[ScalePoint] = []
    failure = ""
    for index, launch in enumerate(plan.launches):
        try:
            status = _run_point(settings, jobs, studies, plan, index, watcher, poll_s)
        except ActionError as error:
            failure = f"the {launch.workers}-worker point could not run: {error}"
            break
        point = _measured(settings, launch, status.name)
        points.append(point)
        if status.state != JobState.SUCCEEDED:
            failure = f"the {launch.workers}-worker point ({status.name}) ended {status.state}: {status.message}"
            break
        if point.pace is None:
            failure = f"the {launch.workers}-worker point ({status.name}) wrote no step timings to measure"
            break
    ended = studies.finish(study.id, StudyStatus.FAILED if failure else StudyStatus.SUCCEEDED, failure)
    table = scale_table(points, settings.scale_efficiency_threshold)
    return StudyResult(ended, tuple(points), table, ended_at=index if failure else None)


def _run_point(
    settings: Settings,
    jobs: Jobs,
    studies: StudyStore,
    plan: StudyPlan,
    index: int,
    watcher: PointWatcher | None,
    poll_s: float,
) -> JobStatus:
    """Launch the plan's point `index`, record it in the study, and wait until it ends; one still running at the
    point timeout is stopped, its status saying why."""
    record = jobs.launch(plan.launches[index], plan.backend)
    studies.add_job(plan.id, record.name)
    deadline = time.monotonic() + settings.scale_point_timeout_s
    status = jobs.status(record.name)
    while not status.state.terminal:
        if watcher is not None:
            watcher(index, len(plan.launches), status)
        if time.monotonic() > deadline:
            why = (
                f"ran past {settings.scale_point_timeout_s:g} s (TRAINBOT_SCALE_POINT_TIMEOUT_S) and was stopped; "
                "give fewer --steps or a longer timeout"
            )
            status = replace(jobs.cancel(record.name).status, state=JobState.STOPPED, message=why)
            break
        time.sleep(poll_s)
        status = jobs.status(record.name)
    if watcher is not None:
        watcher(index, len(plan.launches), status)
    return status


def _measured(settings: Settings, launch: Launch, job: str) -> ScalePoint:
    """The point's pace from the step timings its ranks wrote under the run folder; none when they wrote none."""
    assert launch.template.study is not None
    batch = launch.params[launch.template.study.batch]
    try:
        steps = dict(load_bundle(settings.runs_dir() / job, limits=settings.bundle_limits()).steps)
    except NotABundle:
        steps = {}
    return scale_point(launch.workers, launch.gpus_per_worker, int(batch), steps, job)
