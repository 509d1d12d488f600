"""Why a scaling study's curve bends: the diagnosis of the point that ended it (a failure) or else of the first
size whose efficiency fell under the threshold, as `trainbot diagnose` makes it (live evidence; where the head no
longer knows the job, its step timings alone), with what the sizes together say about that point
(diagnosers.study)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actions.evidence.comparing import verdict_of

if TYPE_CHECKING:
    from actions.jobs.scaling import StudyResult
    from actions.jobs.service import Jobs
    from actions.settings import Settings
    from diagnosers.engine import Diagnosis


@dataclass(frozen=True)
class PointDiagnosis:
    """The diagnosis of one point of a study, and why that point."""

    job: str
    workers: int
    why: str  # "it failed", or its efficiency against the threshold
    diagnosis: Diagnosis
    verdict_from: str
    across: tuple[str, ...] = ()  # the ids of its findings read across the study's sizes (diagnosers.study)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "workers": self.workers,
            "why": self.why,
            "verdict_from": self.verdict_from,
            "across": list(self.across),
            **self.diagnosis.to_dict(),
        }


def explain_study(settings: Settings, jobs: Jobs, result: StudyResult) -> PointDiagnosis | None:
    """The diagnosis of the point that ended a failed study, else of the first size under the efficiency
    threshold; None when neither is there (every size kept up, or the failing point never got a job)."""
    from diagnosers.bundle import NotABundle, load_bundle  # noqa: PLC0415 - the rules load on first use
    from diagnosers.evidence import Evidence  # noqa: PLC0415
    from diagnosers.study import study_findings  # noqa: PLC0415

    chosen = point_to_explain(result)
    if chosen is None:
        return None
    index, why = chosen
    job = result.study.jobs[index]
    try:
        steps = load_bundle(settings.runs_dir() / job, limits=settings.bundle_limits())
    except NotABundle:
        steps = Evidence()
    # A point that ended the study is explained by its own failure; one that kept up poorly, by the sizes together.
    across = study_findings(result.points, result.table) if result.ended_at is None else []
    diagnosis, verdict_from = verdict_of(settings, jobs, job, steps, across)
    return PointDiagnosis(
        job, result.study.sizes[index], why, diagnosis, verdict_from, tuple(found.id for found in across)
    )


def point_to_explain(result: StudyResult) -> tuple[int, str] | None:
    """(the index in sizes of the point to diagnose, why that one), as explain_study chooses it."""
    table = result.table
    if result.ended_at is not None:
        index, why = result.ended_at, "it ended the study"
    elif table.first_below is not None:
        index = next(i for i, row in enumerate(table.rows) if row.workers == table.first_below)
        why = f"its efficiency {table.rows[index].efficiency or 0.0:.2f} is under {table.threshold:g}"
    else:
        return None
    # A point whose launch itself failed has no job to diagnose.
    return (index, why) if index < len(result.study.jobs) else None
