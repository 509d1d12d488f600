"""Findings word themselves for what the bundle says the job ran on: CPU workers or GPUs (GPUs when it does not say).

The timings are written by workloads' StepTimer, as the reference trainer writes them (with the device when it
is told one); the GPU metrics by the scenario builder, as dcgm-exporter's series.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from diagnosers.engine import diagnose_path
from tests.builders.scenarios import Gpu, write_bundle_json, write_dcgm, write_steps
from workloads.steps import StepTimer


def write_compute_bound_ranks(bundle: Path, ranks: int, device: str = "") -> None:
    ticks = itertools.count()
    for rank in range(ranks):
        timer = StepTimer(bundle / "steps", rank, clock=lambda: next(ticks) * 0.05, device=device)
        for _ in range(12):
            with timer.step(samples=16):
                pass
        timer.close()


def compute_bound(bundle: Path) -> tuple[str, str]:
    diagnosis = diagnose_path(bundle)
    assert diagnosis.verdict == "compute-bound", diagnosis.summary
    found = diagnosis.findings[0]
    return found.title, found.detail


def test_a_cpu_run_is_compute_bound_on_cpu_with_advice_for_cpus(tmp_path: Path) -> None:
    write_compute_bound_ranks(tmp_path, ranks=2, device="cpu")
    title, detail = compute_bound(tmp_path)
    assert title == "Compute-bound on CPU: the processors are the bottleneck"
    assert "It ran on 2 CPU workers and no GPU" in detail
    assert "OMP_NUM_THREADS" in detail and "a GPU if one is available" in detail
    assert "GPUs" not in title + detail and "torch.compile" not in detail


def test_bundle_json_without_gpus_says_cpu_when_the_records_do_not(tmp_path: Path) -> None:
    write_compute_bound_ranks(tmp_path, ranks=1)
    write_bundle_json(tmp_path, job="tiny-transformer-7f3a", status="SUCCEEDED", world_size=1, gpus_per_worker=0)
    title, detail = compute_bound(tmp_path)
    assert title.startswith("Compute-bound on CPU")
    assert "It ran on 1 CPU worker and" in detail


@pytest.mark.parametrize("said_by", ["records", "dcgm"])
def test_a_gpu_run_keeps_the_gpu_advice(tmp_path: Path, said_by: str) -> None:
    write_compute_bound_ranks(tmp_path, ranks=2, device="cuda" if said_by == "records" else "")
    if said_by == "dcgm":
        write_dcgm(tmp_path, [Gpu("node-0", i, {"DCGM_FI_DEV_GPU_UTIL": 97}) for i in range(2)])
    title, detail = compute_bound(tmp_path)
    assert title == "Compute-bound: the GPUs are the bottleneck"
    assert "torch.compile" in detail and "more GPUs" in detail


def test_a_bundle_that_does_not_say_is_worded_for_gpus_as_before(tmp_path: Path) -> None:
    write_compute_bound_ranks(tmp_path, ranks=2)
    title, _ = compute_bound(tmp_path)
    assert title == "Compute-bound: the GPUs are the bottleneck"


def test_a_small_batch_on_cpu_workers_says_cpu_workers(tmp_path: Path) -> None:
    write_steps(tmp_path, ranks=2, steps=50, step_s=0.024, data_s=0.001, comm_s=0.015, samples=8)
    write_bundle_json(tmp_path, job="tiny-transformer-7f3a", status="SUCCEEDED", world_size=2, gpus_per_worker=0)
    small = next(found for found in diagnose_path(tmp_path).findings if found.id == "small-batch")
    assert small.title == "Batch per CPU worker too small for data parallelism"
    assert "8 samples per CPU worker" in small.detail and "GPU" not in small.detail
    comm = next(found for found in diagnose_path(tmp_path).findings if found.id == "comm-bound")
    assert "Check the gloo transport" in comm.detail and "a larger batch per CPU worker" in comm.detail
