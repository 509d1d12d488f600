"""What a job ran on, as its bundle says: GPUs or CPUs, and how many ranks, so findings word themselves for it.

Reads, most direct first: the device each step record names (workloads' StepTimer writes torch's device
type); GPU metrics in the bundle (DCGM's or Ray's GPU series exist only where GPUs do); bundle.json's
gpus_per_worker (what the job asked for). A bundle that says none of these is worded for GPUs, as trainbot's
findings always were: the runs people bring are GPU runs, and their logs (per-GPU batches, NCCL) say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from diagnosers.evidence import Evidence

Device = Literal["gpu", "cpu"]
GPU_METRIC_PREFIXES = ("DCGM_", "ray_node_gpus_", "ray_node_gram_")


@dataclass(frozen=True)
class Hardware:
    device: Device
    # Ranks with step timings, else bundle.json's world_size; None when neither says.
    ranks: int | None

    @property
    def unit(self) -> str:
        """What one rank runs on, for "per-GPU batch", "each CPU worker"."""
        return "CPU worker" if self.device == "cpu" else "GPU"

    @property
    def units(self) -> str:
        return f"{self.unit}s"

    @property
    def collectives(self) -> str:
        """The library whose collectives the ranks wait in (PyTorch's default backend for the device)."""
        return "gloo" if self.device == "cpu" else "NCCL"


def hardware(evidence: Evidence) -> Hardware:
    return Hardware(_device(evidence), len(evidence.steps) or evidence.meta.world_size)


def _device(evidence: Evidence) -> Device:
    named = {record.device for records in evidence.steps.values() for record in records if record.device}
    if named:
        return "cpu" if named == {"cpu"} else "gpu"
    if any(
        series.values
        for metric, of_metric in evidence.series.items()
        if metric.startswith(GPU_METRIC_PREFIXES)
        for series in of_metric
    ):
        return "gpu"
    return "cpu" if evidence.meta.gpus_per_worker == 0 else "gpu"
