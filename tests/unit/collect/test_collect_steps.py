"""Collecting step timings: a training job's ranks, or a sweep's slowest trial, named in bundle.json and the diagnosis.

The runs are written by workloads' own StepTimer, in the layouts the reference trainer and Ray Tune give them:
<runs>/<job>/steps/rank-N.jsonl, and <runs>/<sweep>/<trial>/steps/rank-0.jsonl.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from diagnosers.collect.collector import collect
from diagnosers.collect.steps import collect_steps
from diagnosers.collect.target import CollectConfig, Target
from diagnosers.engine import diagnose_path
from workloads.steps import StepTimer

SWEEP = "tiny-transformer-sweep-4c2a"


def write_run(steps: Path, rank: int, step_s: float, steps_taken: int = 10) -> None:
    """A rank that computes for `step_s` each step (a clock that advances by it) and waits for nothing."""
    ticks = itertools.count()
    timer = StepTimer(steps, rank, clock=lambda: next(ticks) * step_s, wall_clock=lambda: 1.7e9)
    for _ in range(steps_taken):
        with timer.step(samples=16):
            pass
    timer.close()


def collected(run: Path, folder: Path) -> Path:
    target = Target(job=run.name, backend="local", status="SUCCEEDED", run_dir=str(run), world_size=1)
    return collect(target, CollectConfig(), folder, {"steps": collect_steps})


def test_a_sweeps_diagnosis_reads_its_slowest_trials_timings_and_says_so(tmp_path: Path) -> None:
    run = tmp_path / "runs" / SWEEP
    write_run(run / "lr=0.0012" / "steps", 0, step_s=0.040)
    write_run(run / "lr=0.0087" / "steps", 0, step_s=0.090)
    (run / "tuner.pkl").write_bytes(b"Tune's own files sit beside the trials")

    bundle = collected(run, tmp_path / "bundle")

    assert sorted(path.name for path in (bundle / "steps").iterdir()) == ["lr=0.0087--rank-0.jsonl"]
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["sources"]["steps"] == "ok"
    assert meta["steps_from"] == (
        "trial lr=0.0087, the slowest of the sweep's 2 trials that wrote step timings "
        "(mean step 90 ms; the fastest, lr=0.0012, 40 ms)"
    )
    diagnosis = diagnose_path(bundle)
    assert diagnosis.verdict == "compute-bound"
    assert "Step timings: trial lr=0.0087, the slowest of the sweep's 2 trials" in diagnosis.summary
    assert diagnosis.findings[0].evidence[0].source == "steps/lr=0.0087--rank-0.jsonl"


def test_a_training_jobs_ranks_are_collected_as_written(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "tiny-transformer-7f3a"
    for rank in range(2):
        write_run(run / "steps", rank, step_s=0.05)

    bundle = collected(run, tmp_path / "bundle")

    assert sorted(path.name for path in (bundle / "steps").iterdir()) == ["rank-0.jsonl", "rank-1.jsonl"]
    assert "steps_from" not in json.loads((bundle / "bundle.json").read_text())
    assert "Step timings:" not in diagnose_path(bundle).summary


def test_a_job_that_wrote_no_timings_says_where_they_were_looked_for(tmp_path: Path) -> None:
    run = tmp_path / "runs" / SWEEP
    (run / "lr=0.0012").mkdir(parents=True)

    bundle = collected(run, tmp_path / "bundle")

    status = json.loads((bundle / "bundle.json").read_text())["sources"]["steps"]
    assert status == f"error: {run / 'steps'} does not exist (the job wrote no step timings)"
    assert diagnose_path(bundle).verdict == "insufficient-evidence"


def test_a_trials_start_up_does_not_make_it_the_slowest(tmp_path: Path) -> None:
    run = tmp_path / "runs" / SWEEP
    write_run(run / "lr=0.0087" / "steps", 0, step_s=0.090)
    # Fast once started, after a first step that compiled and warmed up for two seconds.
    warmed = run / "lr=0.0012" / "steps"
    warmed.mkdir(parents=True)
    times = [2.0] + [0.040] * 9
    records = [{"rank": 0, "step": step, "time": 1.7e9, "step_s": step_s, "data_s": 0.0, "comm_s": 0.0, "samples": 16}
               for step, step_s in enumerate(times)]  # fmt: skip
    (warmed / "rank-0.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))

    bundle = collected(run, tmp_path / "bundle")

    assert json.loads((bundle / "bundle.json").read_text())["steps_from"] == (
        "trial lr=0.0087, the slowest of the sweep's 2 trials that wrote step timings "
        "(mean step 90 ms; the fastest, lr=0.0012, 40 ms)"
    )
