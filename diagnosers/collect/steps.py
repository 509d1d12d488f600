"""Step timings the reference trainer (or any loop with workloads.steps.StepTimer) wrote on disk.

A training job's ranks write <run_dir>/steps/rank-N.jsonl. A sweep's trials each write their own,
<run_dir>/<trial>/steps/rank-N.jsonl, and every trial has a rank 0: the bundle holds one job's ranks,
so one trial is taken, the slowest (the trial that costs the sweep the most time per step), and
bundle.json's `steps_from` says which and why.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, OK, BundleWriter, error_status
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.local_logs import read_tail
from diagnosers.collect.target import CollectConfig, Target
from diagnosers.rules.measures import steady

MAX_RANK_FILES = 1024
# A sweep's trials read to find the slowest: more than trainbot lets a sweep have.
MAX_TRIALS = 1000


@dataclass(frozen=True)
class _Trial:
    steps: Path  # the trial's steps/ folder
    mean_step_s: float

    @property
    def name(self) -> str:
        return self.steps.parent.name


def collect_steps(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
    """Copy the job's steps/rank-N.jsonl (a sweep's: its slowest trial's), each cut to its last config.log_max_bytes."""
    if not target.run_dir:
        writer.source("steps", NOT_CONFIGURED)
        return
    run = Path(target.run_dir)
    if (run / "steps").is_dir():
        for name, data in _rank_files(run / "steps", config, deadline).items():
            writer.write_bytes(f"steps/{name}", data)
        writer.source("steps", OK)
        return
    trials = _trials(run, config, deadline)
    if not trials:
        writer.source("steps", error_status(f"{run / 'steps'} does not exist (the job wrote no step timings)"))
        return
    slowest = max(trials, key=lambda trial: trial.mean_step_s)
    for name, data in _rank_files(slowest.steps, config, deadline).items():
        writer.write_bytes(f"steps/{slowest.name}--{name}", data)
    writer.meta("steps_from", _why_this_trial(slowest, trials))
    writer.source("steps", OK)


def _rank_files(folder: Path, config: CollectConfig, deadline: Deadline) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path in sorted(folder.glob("*.jsonl"))[:MAX_RANK_FILES]:
        deadline.timeout(config.request_timeout_s)
        if data := read_tail(path, config.log_max_bytes):
            files[path.name] = data
    return files


def _trials(run: Path, config: CollectConfig, deadline: Deadline) -> list[_Trial]:
    """The trials under `run` (a Ray Tune experiment folder) that wrote step timings, with their mean step. Only
    the times are kept (the chosen trial's files are read again to copy): a thousand trials' files never sit in
    memory at once."""
    if not run.is_dir():
        return []
    trials = []
    for steps in sorted(run.glob("*/steps"))[:MAX_TRIALS]:
        # The steady steps, as the rules measure them: a trial's start-up is not its pace.
        times = [
            step_s for data in _rank_files(steps, config, deadline).values() for step_s in steady(_step_times(data))
        ]
        if times:
            trials.append(_Trial(steps, statistics.fmean(times)))
    return trials


def _step_times(data: bytes) -> list[float]:
    times = []
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        step_s = record.get("step_s") if isinstance(record, dict) else None
        if isinstance(step_s, int | float):
            times.append(float(step_s))
    return times


def _why_this_trial(chosen: _Trial, trials: list[_Trial]) -> str:
    """The sentence bundle.json keeps: which trial's timings the bundle holds, and why that one."""
    if len(trials) == 1:
        return f"trial {chosen.name}, the only trial of this sweep that wrote step timings"
    fastest = min(trials, key=lambda trial: trial.mean_step_s)
    return (
        f"trial {chosen.name}, the slowest of the sweep's {len(trials)} trials that wrote step timings "
        f"(mean step {chosen.mean_step_s * 1000:.0f} ms; the fastest, {fastest.name}, "
        f"{fastest.mean_step_s * 1000:.0f} ms)"
    )
