"""A scaling study's table: the same run at several sizes, each point's pace set against the smallest size's.

A pure function of each point's measured pace (diagnosers.comparison.run_pace, the rules' own steady steps), so
the study, a comparison and a diagnosis never disagree on a run's samples a second or its comm share.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the settings read this module's default: it must not load the rules
    from diagnosers.comparison import RunPace
    from diagnosers.findings import Quote

DEFAULT_EFFICIENCY_THRESHOLD = 0.8


@dataclass(frozen=True)
class ScalePoint:
    """One size of the study as measured: no pace when the point did not run long enough, or failed; its median
    steady step as a rank wrote it, for a finding to quote."""

    workers: int
    gpus_per_worker: int
    per_worker_batch: int
    pace: RunPace | None
    median_step: Quote | None = None


@dataclass(frozen=True)
class ScaleRow:
    """One row of the table. Speedup and efficiency are against the smallest measured size; None where that
    size or this one has no pace. Efficiency is speedup over the ideal (N / N0)."""

    workers: int
    gpus_per_worker: int
    per_worker_batch: int
    samples_per_s: float | None
    mean_step_s: float | None
    speedup: float | None
    efficiency: float | None
    data_share: float | None
    compute_share: float | None
    comm_share: float | None

    @property
    def measured(self) -> bool:
        return self.mean_step_s is not None


@dataclass(frozen=True)
class ScaleTable:
    """The study's rows by size, the first size whose efficiency falls under the threshold, and how the comm
    share grew from the smallest measured size to the largest (in shares, 0.3 = 30 points)."""

    rows: list[ScaleRow]
    threshold: float
    first_below: int | None  # the workers of the first row under the threshold; None when none is
    comm_growth: float | None  # None with fewer than two measured sizes

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [asdict(row) for row in self.rows],
            "threshold": self.threshold,
            "first_below": self.first_below,
            "comm_growth": self.comm_growth,
        }


def scale_table(points: list[ScalePoint], threshold: float = DEFAULT_EFFICIENCY_THRESHOLD) -> ScaleTable:
    """The study's table over its points (in any order; one per size)."""
    ordered = sorted(points, key=lambda point: point.workers * max(point.gpus_per_worker, 1))
    base = next((point for point in ordered if point.pace is not None), None)
    rows = [_row(point, base) for point in ordered]
    first_below = next(
        (row.workers for row in rows if row.efficiency is not None and row.efficiency < threshold),
        None,
    )
    measured = [row.comm_share for row in rows if row.comm_share is not None]
    comm_growth = measured[-1] - measured[0] if len(measured) > 1 else None
    return ScaleTable(rows, threshold, first_below, comm_growth)


def _devices(point: ScalePoint) -> int:
    # A CPU-only point (no GPUs) still trains on one device per worker.
    return point.workers * max(point.gpus_per_worker, 1)


def _throughput(point: ScalePoint) -> float | None:
    """Samples a second as counted by the steps; where they counted none, every worker's batch per mean step."""
    if point.pace is None:
        return None
    if point.pace.samples_per_s:
        return point.pace.samples_per_s
    if point.pace.mean_step_s and point.per_worker_batch:
        return point.workers * point.per_worker_batch / point.pace.mean_step_s
    return None


def _row(point: ScalePoint, base: ScalePoint | None) -> ScaleRow:
    pace, throughput = point.pace, _throughput(point)
    base_throughput = _throughput(base) if base is not None else None
    gain = throughput / base_throughput if throughput is not None and base_throughput else None
    ideal = _devices(point) / _devices(base) if base is not None else None
    return ScaleRow(
        workers=point.workers,
        gpus_per_worker=point.gpus_per_worker,
        per_worker_batch=point.per_worker_batch,
        samples_per_s=throughput,
        mean_step_s=pace.mean_step_s if pace else None,
        speedup=gain,
        efficiency=gain / ideal if gain is not None and ideal else None,
        data_share=pace.data_share if pace else None,
        compute_share=pace.compute_share if pace else None,
        comm_share=pace.comm_share if pace else None,
    )
