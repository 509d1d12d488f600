"""Why a scaling study's curve bends, read across its sizes: what one run's rules cannot see.

One run's step timings say where its time goes; a study says what adding workers added to each step. At the
first size whose efficiency falls under the threshold, the study compares that point with the smallest measured
one: when each worker's batch is small and the collectives grew, the per-step cost that no batch split shrinks
is the cause (small-batch); when the collectives added more to the step than anything else, the run is
comm-bound at that size whatever its own shares say. Both quote each size's median step as its ranks wrote it.
A pure function of the study's points and table.
"""

from __future__ import annotations

from collections.abc import Sequence

from diagnosers.comparison import run_pace
from diagnosers.evidence import StepRecord
from diagnosers.findings import COMM_BOUND, SMALL_BATCH, Finding, Quote, Severity
from diagnosers.rules.common import finding
from diagnosers.rules.measures import step_phases_of
from diagnosers.rules.small_batch import SMALL_BATCH_SAMPLES
from diagnosers.scaling import ScalePoint, ScaleRow, ScaleTable

# The collectives must have grown by this much of the step before the study blames them: less is noise
# between two runs of the same size on a shared machine.
MIN_COMM_GROWTH = 0.05
# Measured across sizes, these rank above one run's own verdicts (comm-bound at most 0.9, compute-bound 0.9).
SMALL_BATCH_CONFIDENCE = 0.95
COMM_BOUND_CONFIDENCE = 0.93


def scale_point(
    workers: int, gpus_per_worker: int, per_worker_batch: int, steps: dict[int, list[StepRecord]], run: str
) -> ScalePoint:
    """One size as its ranks' step records measure it; its median step is quoted from the folder `run`."""
    phases = step_phases_of(steps)
    median = phases.representative(1)[0] if phases is not None else None
    quote = Quote(f"{run}/{median.source}", median.line, median.text) if median is not None else None
    return ScalePoint(workers, gpus_per_worker, per_worker_batch, run_pace(steps), quote)


def study_findings(points: Sequence[ScalePoint], table: ScaleTable) -> list[Finding]:
    """What the sizes together say about the first size under the threshold; nothing when none fell under it,
    when fewer than two sizes were measured, or when the collectives did not grow."""
    measured = [row for row in table.rows if row.measured]
    point = next((row for row in measured if row.workers == table.first_below), None)
    if point is None or not measured or point is measured[0]:
        return []
    base = measured[0]
    assert base.comm_share is not None and point.comm_share is not None  # measured rows carry their shares
    if point.comm_share - base.comm_share < MIN_COMM_GROWTH:
        return []
    quotes = [quote for quote in (_median_step(points, row) for row in (base, point)) if quote is not None]
    found = []
    if point.per_worker_batch <= SMALL_BATCH_SAMPLES:
        found.append(_small_batch(base, point, table, quotes))
    if _added(point, base, "comm") >= max(_added(point, base, "data"), _added(point, base, "compute")):
        found.append(_comm_bound(base, point, quotes))
    return found


def _small_batch(base: ScaleRow, point: ScaleRow, table: ScaleTable, quotes: list[Quote]) -> Finding:
    detail = (
        f"At {_workers(point.workers)} each worker's batch is {_samples(point.per_worker_batch)} a step "
        f"({_samples(base.per_worker_batch)} at {_workers(base.workers)}), yet its step takes "
        f"{_ms(point.mean_step_s)} against {_ms(base.mean_step_s)}: what a step costs whatever its batch (the "
        f"gradient all-reduce, {_comm_growth(base, point)}, and the optimizer's update) outweighs the work "
        f"split between the workers, so {_workers(point.workers)} keep {point.efficiency or 0.0:.0%} of the "
        f"ideal speedup (threshold {table.threshold:.0%}). Raise the batch so each worker gets more than "
        f"{SMALL_BATCH_SAMPLES} samples (scale the learning rate), accumulate gradients over several micro-batches "
        "with no_sync(), or use fewer workers."
    )
    return finding(
        SMALL_BATCH,
        Severity.WARNING,
        SMALL_BATCH_CONFIDENCE,
        "Batch per worker too small for data parallelism",
        detail,
        quotes=quotes,
    )


def _comm_bound(base: ScaleRow, point: ScaleRow, quotes: list[Quote]) -> Finding:
    detail = (
        f"The collectives grew with the workers: {_comm_growth(base, point)}. From {_workers(base.workers)} to "
        f"{_workers(point.workers)} they added {_added(point, base, 'comm') * 1000:.1f} ms to each step, while "
        f"compute changed it by {_added(point, base, 'compute') * 1000:+.1f} ms and data loading by "
        f"{_added(point, base, 'data') * 1000:+.1f} ms. Check the transport between the workers, "
        "overlap communication with backward (DDP buckets), all-reduce less often (gradient accumulation), or "
        "use fewer workers."
    )
    return finding(
        COMM_BOUND,
        Severity.WARNING,
        COMM_BOUND_CONFIDENCE,
        f"Communication-bound at {_workers(point.workers)}: collectives grew with the workers",
        detail,
        quotes=quotes,
    )


def _added(point: ScaleRow, base: ScaleRow, phase: str) -> float:
    """Seconds the phase added to the mean step from `base` to `point` (negative where it shrank)."""
    return _phase_s(point, phase) - _phase_s(base, phase)


def _phase_s(row: ScaleRow, phase: str) -> float:
    share = getattr(row, f"{phase}_share")
    return (share or 0.0) * (row.mean_step_s or 0.0)


def _comm_growth(base: ScaleRow, point: ScaleRow) -> str:
    return (
        f"{base.comm_share or 0.0:.0%} of the step at {_workers(base.workers)} and "
        f"{point.comm_share or 0.0:.0%} at {_workers(point.workers)}"
    )


def _median_step(points: Sequence[ScalePoint], row: ScaleRow) -> Quote | None:
    return next((point.median_step for point in points if point.workers == row.workers), None)


def _workers(count: int) -> str:
    return f"{count} worker{'s' if count != 1 else ''}"


def _samples(count: int) -> str:
    return f"{count} sample{'s' if count != 1 else ''}"


def _ms(seconds: float | None) -> str:
    return f"{(seconds or 0.0) * 1000:.1f} ms"
