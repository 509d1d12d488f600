"""Where the time goes: GPU activity from DCGM or Ray metrics, and step phases from steps/.

Shared by the bottleneck, straggler and small-batch rules. dcgm-exporter's default counters
include GPU_UTIL, GR_ENGINE_ACTIVE, PIPE_TENSOR_ACTIVE and DRAM_ACTIVE, while SM_ACTIVE and
NVLink bytes are opt-in: every reading here falls back to what the bundle has.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from diagnosers.evidence import Evidence, Series, StepRecord
from diagnosers.findings import Quote

# Utilisation in percent (0-100) or as a ratio (0-1), most direct first.
UTILISATION_METRICS: tuple[tuple[str, float], ...] = (
    ("DCGM_FI_DEV_GPU_UTIL", 100.0),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1.0),
    ("ray_node_gpus_utilization", 100.0),
)
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"

# The first tenth of a run is start-up (data loader warm-up, NCCL init, compilation): left out.
WARMUP_SHARE = 0.1

_HOST_LABELS = ("Hostname", "hostname", "instance", "node", "kubernetes_node", "ip", "pod")
_GPU_LABELS = ("gpu", "GpuIndex", "device", "minor_number", "UUID")


def steady(values: list[float]) -> list[float]:
    skip = int(len(values) * WARMUP_SHARE)
    return values[skip:] or values


def gpu_key(series: Series) -> str:
    """A GPU's name from whichever labels the exporter set: 'node-3/gpu 5'."""
    host = next((series.labels[label] for label in _HOST_LABELS if series.labels.get(label)), "")
    gpu = next((series.labels[label] for label in _GPU_LABELS if series.labels.get(label)), "")
    return f"{host}/gpu {gpu}" if host and gpu else host or f"gpu {gpu}" if gpu else series.labels.get("UUID", "gpu")


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One metric averaged over the steady part of the run, per GPU and over all GPUs."""

    metric: str
    per_gpu: dict[str, float]
    series: dict[str, Series]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.per_gpu.values())

    def quote_extremes(self, unit: str = "") -> list[Quote]:
        """The lowest and highest GPU, quoted with their means."""
        ordered = sorted(self.per_gpu, key=self.per_gpu.__getitem__)
        picks = dict.fromkeys([ordered[0], ordered[-1]])
        return [self.series[key].quote(f"mean {self.per_gpu[key]:.2f}{unit} over the run") for key in picks]


def reading(evidence: Evidence, metric: str, scale: float = 1.0) -> GpuReading | None:
    _, found = evidence.metric(metric)
    if not found:
        return None
    per_gpu: dict[str, float] = {}
    by_key: dict[str, Series] = {}
    for series in found:
        key = gpu_key(series)
        per_gpu[key] = statistics.fmean(steady(series.values)) / scale
        by_key[key] = series
    return GpuReading(metric, per_gpu, by_key)


def utilisation(evidence: Evidence) -> GpuReading | None:
    """GPU busy share (0-1) from the most direct utilisation metric the bundle has."""
    for metric, scale in UTILISATION_METRICS:
        found = reading(evidence, metric, scale)
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class StepPhases:
    """Steady-state step phases summed over ranks: the shares of step time spent where."""

    step_s: float
    data_s: float
    comm_s: float
    steps: int
    per_rank: dict[int, list[StepRecord]]

    @property
    def data_share(self) -> float:
        return self.data_s / self.step_s if self.step_s else 0.0

    @property
    def comm_share(self) -> float:
        return self.comm_s / self.step_s if self.step_s else 0.0

    @property
    def compute_share(self) -> float:
        return max(0.0, 1.0 - self.data_share - self.comm_share)

    @property
    def mean_step_s(self) -> float:
        return self.step_s / self.steps if self.steps else 0.0

    def median_samples(self) -> float | None:
        samples = [record.samples for records in self.per_rank.values() for record in records if record.samples]
        return statistics.median(samples) if samples else None

    def representative(self, limit: int = 3) -> list[Quote]:
        """The median step of a few ranks, quoted as written."""
        quotes = []
        for rank in sorted(self.per_rank)[:limit]:
            records = sorted(self.per_rank[rank], key=lambda record: record.step_s)
            quotes.append(records[len(records) // 2].quote)
        return quotes


def step_phases(evidence: Evidence) -> StepPhases | None:
    per_rank = {
        rank: steady(sorted(records, key=lambda record: record.step))
        for rank, records in evidence.steps.items()
        if records
    }
    if not per_rank:
        return None
    records = [record for rank_records in per_rank.values() for record in rank_records]
    return StepPhases(
        step_s=sum(record.step_s for record in records),
        data_s=sum(min(record.data_s, record.step_s) for record in records),
        comm_s=sum(min(record.comm_s, record.step_s) for record in records),
        steps=len(records),
        per_rank=per_rank,
    )
