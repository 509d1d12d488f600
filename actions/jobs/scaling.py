"""A scaling study: one template launched at each size in turn (launch, wait, measure, next), or with `parallel`
all at once (launch all, wait for all, measure each as it ends), set in a table.

Each point runs `steps` measured steps after a warm-up. The warm-up is the first tenth of each rank's steps, which
the rules already leave out (diagnosers.rules.measures.WARMUP_SHARE): a point runs ceil(steps / 0.9) steps in all,
so at least `steps` of them are measured. `--batch per-worker` keeps each worker's batch (weak scaling); `global`
keeps the batch as given and divides it over the workers (strong scaling). A point that fails, or measures
nothing, ends the study: the table holds what was measured up to there (in parallel, the points still running
are stopped, and measured with what they wrote).

In parallel the points compete for the machine, so their figures say what each size does beside the others, not
alone. The study starts only where the backend can hold every point at once (the local head's CPUs and GPUs
against the sum of the points' requests); a backend that cannot say (KubeRay: each RayJob gets its own cluster,
placed or queued by Kubernetes) is taken at its word.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from actions.errors import ActionError, BadRequest
from actions.jobs.job import Capacity, JobState, JobStatus, Launch, new_job_name
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
    parallel: bool = False  # launch every point at once


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
    parallel: bool = False


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
        parallel=request.parallel,
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
    """Run the plan's points one after another, each measured when its job ends, or with `plan.parallel` all at
    once; a point that fails or measures nothing ends the study there. A parallel plan the backend cannot hold
    at once is a BadRequest, before the study is stored or anything launched."""
    if plan.parallel:
        refuse_beyond_capacity(jobs.backend(plan.backend).capacity(), plan)
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
            parallel=plan.parallel,
        )
    )
    run = _run_together if plan.parallel else _run_in_turn
    outcome = run(_PointRunner(settings, jobs, studies, plan, watcher), poll_s)
    failed = outcome.ended_at is not None
    ended = studies.finish(study.id, StudyStatus.FAILED if failed else StudyStatus.SUCCEEDED, outcome.failure)
    table = scale_table(list(outcome.points), settings.scale_efficiency_threshold)
    return StudyResult(ended, outcome.points, table, ended_at=outcome.ended_at)


def refuse_beyond_capacity(capacity: Capacity | None, plan: StudyPlan) -> None:
    """A BadRequest when the backend's `capacity` cannot hold every point of the plan at once (None: unknown,
    nothing refused)."""
    if capacity is None:
        return
    cpus = sum(launch.workers * launch.template.cpus_per_worker for launch in plan.launches)
    gpus = sum(launch.workers * launch.gpus_per_worker for launch in plan.launches)
    if cpus > capacity.cpus or gpus > capacity.gpus:
        raise BadRequest(
            f"--parallel: the {len(plan.launches)} points need {cpus:g} CPUs and {gpus} GPUs at once, and "
            f"{plan.backend} has {capacity.cpus:g} CPUs and {capacity.gpus:g} GPUs; drop --parallel or give fewer sizes"
        )


@dataclass(frozen=True)
class _Outcome:
    """The points measured (by size), and for a study that failed, why and at which point (index in sizes)."""

    points: tuple[ScalePoint, ...]
    failure: str = ""
    ended_at: int | None = None


@dataclass(frozen=True)
class _PointRunner:
    """What running a plan's points needs: launch one, follow it, stop it, measure it, say why it ends the study."""

    settings: Settings
    jobs: Jobs
    studies: StudyStore
    plan: StudyPlan
    watcher: PointWatcher | None

    def launch(self, index: int) -> str:
        """Launch point `index` and record it in the study; the job's name."""
        record = self.jobs.launch(self.plan.launches[index], self.plan.backend)
        self.studies.add_job(self.plan.id, record.name)
        return record.name

    def status(self, index: int, job: str, deadline: float) -> JobStatus:
        """The point's status now, told to the watcher; one still running past `deadline` is stopped, its status
        saying why."""
        status = self.jobs.status(job)
        if not status.state.terminal and time.monotonic() > deadline:
            why = (
                f"ran past {self.settings.scale_point_timeout_s:g} s (TRAINBOT_SCALE_POINT_TIMEOUT_S) and was "
                "stopped; give fewer --steps or a longer timeout"
            )
            status = replace(self.jobs.cancel(job).status, state=JobState.STOPPED, message=why)
        if self.watcher is not None:
            self.watcher(index, len(self.plan.launches), status)
        return status

    def deadline(self) -> float:
        return time.monotonic() + self.settings.scale_point_timeout_s

    def measured(self, index: int, job: str) -> ScalePoint:
        return _measured(self.settings, self.plan.launches[index], job)

    def failure(self, index: int, status: JobStatus, point: ScalePoint) -> str:
        """Why the point's end ends the study; "" when it succeeded and was measured."""
        workers = self.plan.launches[index].workers
        if status.state != JobState.SUCCEEDED:
            return f"the {workers}-worker point ({status.name}) ended {status.state}: {status.message}"
        if point.pace is None:
            return f"the {workers}-worker point ({status.name}) wrote no step timings to measure"
        return ""

    def unable(self, index: int, error: ActionError) -> str:
        return f"the {self.plan.launches[index].workers}-worker point could not run: {error}"


def _run_in_turn(points: _PointRunner, poll_s: float) -> _Outcome:
    """Each point launched once the one before it has ended and been measured."""
    measured: list[ScalePoint] = []
    for index in range(len(points.plan.launches)):
        try:
            job = points.launch(index)
            deadline = points.deadline()
            while not (status := points.status(index, job, deadline)).state.terminal:
                time.sleep(poll_s)
        except ActionError as error:
            return _Outcome(tuple(measured), points.unable(index, error), index)
        measured.append(points.measured(index, job))
        if failure := points.failure(index, status, measured[-1]):
            return _Outcome(tuple(measured), failure, index)
    return _Outcome(tuple(measured))


def _run_together(points: _PointRunner, poll_s: float) -> _Outcome:
    """Every point launched at once, then each followed to its end and measured; the first that fails stops the
    others (each measured with what it wrote)."""
    jobs: list[str] = []
    failure, ended_at = "", None
    for index in range(len(points.plan.launches)):
        try:
            jobs.append(points.launch(index))
        except ActionError as error:
            failure, ended_at = points.unable(index, error), index
            break
    deadline = points.deadline()
    measured: dict[int, ScalePoint] = {}
    stopped: set[int] = set()
    while running := [index for index in range(len(jobs)) if index not in measured]:
        if failure:
            _stop(points.jobs, [jobs[index] for index in running if index not in stopped])
            stopped.update(running)
        for index in running:
            try:
                status = points.status(index, jobs[index], deadline)
            except ActionError as error:
                status = JobStatus(jobs[index], JobState.FAILED, message=f"could not be followed: {error}")
            if not status.state.terminal:
                continue
            measured[index] = points.measured(index, jobs[index])
            if not failure and (failure := points.failure(index, status, measured[index])):
                ended_at = index
        if len(measured) < len(jobs):
            time.sleep(poll_s)
    return _Outcome(tuple(measured[index] for index in sorted(measured)), failure, ended_at)


def _stop(jobs: Jobs, running: list[str]) -> None:
    """Ask each job to stop; one that cannot be reached is left to the point timeout."""
    for job in running:
        with contextlib.suppress(ActionError):
            jobs.cancel(job)


def _measured(settings: Settings, launch: Launch, job: str) -> ScalePoint:
    """The point's pace from the step timings its ranks wrote under the run folder; none when they wrote none."""
    assert launch.template.study is not None
    batch = launch.params[launch.template.study.batch]
    try:
        steps = dict(load_bundle(settings.runs_dir() / job, limits=settings.bundle_limits()).steps)
    except NotABundle:
        steps = {}
    return scale_point(launch.workers, launch.gpus_per_worker, int(batch), steps, job)
