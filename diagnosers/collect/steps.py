"""Step timings the reference trainer (or any loop with workloads.steps.StepTimer) wrote on disk."""

from __future__ import annotations

from pathlib import Path

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, OK, BundleWriter, error_status
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.local_logs import read_tail
from diagnosers.collect.target import CollectConfig, Target

MAX_RANK_FILES = 1024


def collect_steps(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
    """Copy steps/rank-N.jsonl from target.steps_dir, each cut to its last config.log_max_bytes."""
    if not target.steps_dir:
        writer.source("steps", NOT_CONFIGURED)
        return
    folder = Path(target.steps_dir)
    if not folder.is_dir():
        writer.source("steps", error_status(f"{folder} does not exist (the job wrote no step timings)"))
        return
    for path in sorted(folder.glob("*.jsonl"))[:MAX_RANK_FILES]:
        deadline.timeout(config.request_timeout_s)
        if data := read_tail(path, config.log_max_bytes):
            writer.write_bytes(f"steps/{path.name}", data)
    writer.source("steps", OK)
