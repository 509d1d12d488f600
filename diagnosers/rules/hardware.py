"""What a job ran on, as its bundle says: GPUs or CPUs, and how many ranks, so findings word themselves for it.

Reads, most direct first: the device each step record names (workloads' StepTimer writes torch's device
type); GPU metrics in the bundle (DCGM's or Ray's GPU series exist only where GPUs do); bundle.json's
gpus_per_worker (what the job asked for). A bundle that says none of these leaves the device unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from diagnosers.evidence import Evidence

Device = Literal["gpu", "cpu", ""]
GPU_METRIC_PREFIXES = ("DCGM_", "ray_node_gpus_", "ray_node_gram_")


@dataclass(frozen=True)
class Hardware:
    device: Device
    # Ranks with step timings, else bundle.json's world_size; None when neither says.
    ranks: int | None

    @property
    def unit(self) -> str:
        """What one rank runs on, for "per-GPU batch", "each CPU worker"."""
        return {"gpu": "GPU", "cpu": "CPU worker"}.get(self.device, "worker")

    @property
    def units(self) -> str:
        return f"{self.unit}s"

    @property
    def collectives(self) -> str:
        """The library whose collectives the ranks wait in (PyTorch's default backend for the device)."""
        return {"gpu": "NCCL", "cpu": "gloo"}.get(self.device, "collective library")


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
    gpus = evidence.meta.gpus_per_worker
    if gpus is None:
        return ""
    return "gpu" if gpus > 0 else "cpu"
