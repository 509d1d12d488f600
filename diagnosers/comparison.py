"""Two runs side by side: an analysis over two loaded step sets, as a pure function (no I/O).

Each run's figures are the rules' own step measures (diagnosers.rules.measures: the steady steps, summed over
ranks), so a comparison and a diagnosis never disagree on what a run's step time or comm share is.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from diagnosers.evidence import StepRecord
from diagnosers.rules.measures import step_phases_of


@dataclass(frozen=True)
class RunPace:
    """One run's steady pace: samples a second over all ranks, the mean step, its phase shares, and per rank."""

    samples_per_s: float | None  # None when the step records carry no sample counts
    mean_step_s: float
    data_share: float
    compute_share: float
    comm_share: float
    steps: int
    rank_step_s: dict[int, float]  # each rank's mean steady step

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ParamDiff:
    """Parameters whose values differ (name -> (A's, B's); absent is None) and how many are the same."""

    differ: dict[str, tuple[Any, Any]]
    same: int

    def to_dict(self) -> dict[str, Any]:
        return {"differ": {name: list(pair) for name, pair in self.differ.items()}, "same": self.same}


def run_pace(steps: dict[int, list[StepRecord]]) -> RunPace | None:
    """The pace of one run's step records (rank -> records); None when there are none."""
    phases = step_phases_of(steps)
    if phases is None:
        return None
    rates = [
        sum(record.samples or 0.0 for record in records) / seconds
        for records in phases.per_rank.values()
        if (seconds := sum(record.step_s for record in records)) and any(record.samples for record in records)
    ]
    return RunPace(
        samples_per_s=sum(rates) if rates else None,
        mean_step_s=phases.mean_step_s,
        data_share=phases.data_share,
        compute_share=phases.compute_share,
        comm_share=phases.comm_share,
        steps=phases.steps,
        rank_step_s={
            rank: statistics.fmean(record.step_s for record in records)
            for rank, records in sorted(phases.per_rank.items())
        },
    )


def param_diff(a: dict[str, Any], b: dict[str, Any]) -> ParamDiff:
    """What differs between two runs' parameters; a parameter only one run has differs."""
    names = sorted(a.keys() | b.keys())
    differ = {name: (a.get(name), b.get(name)) for name in names if a.get(name) != b.get(name)}
    return ParamDiff(differ, len(names) - len(differ))


def speedup(a: RunPace, b: RunPace) -> float | None:
    """B's samples a second over A's (above 1: B is faster); by step time where no samples were counted."""
    if a.samples_per_s and b.samples_per_s:
        return b.samples_per_s / a.samples_per_s
    return a.mean_step_s / b.mean_step_s if b.mean_step_s else None
