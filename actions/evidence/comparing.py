"""Compare two runs trainbot launched: a job (by name or unique prefix) or one trial of a sweep (SWEEP/TRIAL).

Each run's step timings are read from its run folder (<data_dir>/runs/<job>/steps, a trial's
runs/<sweep>/<trial>/steps) with the bundle loader and measured by diagnosers.comparison. A job's verdict is
its diagnosis from live evidence (actions.evidence.diagnosing); where that cannot be collected (its head is
gone), and for a sweep's trial (the sweep's bundle holds its slowest trial), the diagnosis of the step timings
alone. A sweep trial's final metric comes from MLflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actions.errors import ActionError, BadRequest, NotFound

if TYPE_CHECKING:
    from collections.abc import Sequence

    from actions.jobs.records import JobRecord
    from actions.jobs.service import Jobs
    from actions.settings import Settings
    from diagnosers.comparison import ParamDiff, RunPace
    from diagnosers.engine import Diagnosis
    from diagnosers.evidence import Evidence, StepRecord
    from diagnosers.findings import Finding

TRIAL_SEPARATOR = "/"
LIVE, STEPS_ALONE = "live evidence", "its step timings alone"
RUN_SYNTAX = "a job's name (or its first letters), or SWEEP/TRIAL for one trial of a sweep"


@dataclass(frozen=True)
class ComparedRun:
    """One side of a comparison: what was asked for, how fast it went and what the diagnosis says."""

    name: str  # the job, or SWEEP/TRIAL
    backend: str
    workers: int
    gpus_per_worker: int
    params: dict[str, Any]
    pace: RunPace
    verdict: str
    summary: str
    verdict_from: str  # "live evidence", or why the step timings alone
    metrics: dict[str, float] = field(default_factory=dict)  # final MLflow metrics; a plain job has none
    steps: dict[int, list[StepRecord]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": self.backend,
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "params": self.params,
            "pace": self.pace.to_dict(),
            "verdict": self.verdict,
            "summary": self.summary,
            "verdict_from": self.verdict_from,
            "metrics": self.metrics,
        }


@dataclass(frozen=True)
class RunComparison:
    a: ComparedRun
    b: ComparedRun
    params: ParamDiff
    speedup: float | None  # B's pace over A's

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a.to_dict(), "b": self.b.to_dict(), "params": self.params.to_dict(), "speedup": self.speedup}


def compare_runs(settings: Settings, jobs: Jobs, run_a: str, run_b: str) -> RunComparison:
    """The two runs named, compared; an unknown run, the same run twice or one without step timings is a BadRequest
    or NotFound whose message says what to do."""
    from diagnosers.comparison import param_diff, speedup  # noqa: PLC0415 - the rules load on first use

    a, b = _located(jobs, run_a), _located(jobs, run_b)
    if a[0] == b[0]:
        raise BadRequest(f"{run_a} and {run_b} are the same run ({a[0]}); name two different runs")
    compared_a, compared_b = _compared(settings, jobs, *a), _compared(settings, jobs, *b)
    return RunComparison(
        compared_a,
        compared_b,
        param_diff(compared_a.params, compared_b.params),
        speedup(compared_a.pace, compared_b.pace),
    )


def _located(jobs: Jobs, run: str) -> tuple[str, JobRecord, str]:
    """(the run's full name, its job's record, the trial's name or "")."""
    job, _, trial = run.partition(TRIAL_SEPARATOR)
    record = jobs.find(job)
    if not trial:
        return record.name, record, ""
    if record.kind != "sweep":
        raise BadRequest(f"{record.name} is not a sweep, so it has no trial {trial!r}; give {RUN_SYNTAX}")
    return f"{record.name}{TRIAL_SEPARATOR}{trial}", record, trial


def _compared(settings: Settings, jobs: Jobs, name: str, record: JobRecord, trial: str) -> ComparedRun:
    from actions.jobs.backends import LOCAL  # noqa: PLC0415
    from diagnosers.bundle import NotABundle, load_bundle  # noqa: PLC0415
    from diagnosers.comparison import run_pace  # noqa: PLC0415
    from diagnosers.engine import diagnose  # noqa: PLC0415

    folder = _run_folder(settings.runs_dir() / record.name, name, trial)
    try:
        evidence = load_bundle(folder, limits=settings.bundle_limits())
    except NotABundle:
        evidence = None
    pace = run_pace(dict(evidence.steps)) if evidence is not None else None
    if evidence is None or pace is None:
        if record.backend != LOCAL:  # its ranks wrote their timings in its pods, and no collector brings them here
            raise NotFound(
                f"{name} ran on {record.backend}: its step timings are not on this machine; compare local runs"
            )
        raise NotFound(f"{name} wrote no step timings ({folder / 'steps'} has none): compare runs that trained a while")
    # A sweep's live evidence holds its slowest trial's steps, not necessarily this trial's.
    diagnosis, verdict_from = (
        (diagnose(evidence), STEPS_ALONE) if trial else verdict_of(settings, jobs, record.name, evidence)
    )
    metrics, params = _trial_tracking(settings, record, trial) if trial else ({}, dict(record.params))
    return ComparedRun(
        name=name,
        backend=record.backend,
        workers=record.workers if not trial else 1,  # a trial trains on one worker of the sweep's cluster
        gpus_per_worker=record.gpus_per_worker,
        params=params,
        pace=pace,
        verdict=diagnosis.verdict,
        summary=diagnosis.summary,
        verdict_from=verdict_from,
        metrics=metrics,
        steps=dict(evidence.steps),
    )


def verdict_of(
    settings: Settings, jobs: Jobs, job: str, steps: Evidence, beyond: Sequence[Finding] = ()
) -> tuple[Diagnosis, str]:
    """The job's diagnosis from its live evidence and where it came from; where the live evidence cannot be
    collected (its head is gone), the diagnosis of its step timings alone, saying why. `beyond`: as
    diagnosers.engine.diagnose takes them."""
    from actions.evidence.diagnosing import diagnose_job  # noqa: PLC0415
    from diagnosers.engine import diagnose  # noqa: PLC0415

    try:
        return diagnose_job(settings, jobs, job, beyond=beyond).diagnosis, LIVE
    except ActionError as error:
        return diagnose(steps, beyond=beyond), f"{STEPS_ALONE} ({error})"


def _run_folder(job_folder: Path, name: str, trial: str) -> Path:
    """The job's run folder, or the one trial folder whose name starts with `trial` (Tune appends its config)."""
    if not trial:
        return job_folder
    found = sorted(path for path in job_folder.glob("*/steps") if path.parent.name.startswith(trial))
    if len(found) != 1:
        trials = ", ".join(sorted(path.parent.name for path in job_folder.glob("*/steps"))[:10]) or "none yet"
        why = "no trial" if not found else "several trials"
        raise NotFound(f"{why} of {job_folder.name} starts with {trial!r}; its trials with step timings: {trials}")
    return found[0].parent


def _trial_tracking(settings: Settings, record: JobRecord, trial: str) -> tuple[dict[str, float], dict[str, Any]]:
    """A trial's final metric and its parameters from MLflow; the sweep's own parameters when MLflow has none."""
    from actions.jobs.planning import sweep_experiment  # noqa: PLC0415
    from actions.jobs.sweep_progress import sweep_progress  # noqa: PLC0415 - MLflow loads only for a trial
    from actions.promotions.registry import MlflowHttp  # noqa: PLC0415

    MlflowHttp.of(settings).apply()  # a silent MLflow server must not stall the comparison
    try:
        progress = sweep_progress(
            settings.tracking_uri(), sweep_experiment(record.template), record.name, int(record.params.get("trials", 0))
        )
    except ActionError:
        return {}, dict(record.params)
    run = next((run for run in progress.runs if trial.startswith(run.name) or run.name.startswith(trial)), None)
    if run is None:
        return {}, dict(record.params)
    metrics = {progress.metric: run.value} if run.value is not None and progress.metric else {}
    return metrics, dict(run.params) or dict(record.params)
