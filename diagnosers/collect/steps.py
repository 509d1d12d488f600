"""Step timings the reference trainer (or any loop with workloads.steps.StepTimer) wrote on disk."""

from __future__ import annotations

from pathlib import Path

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, OK, BundleWriter, error_status
from diagnosers.collect.deadline import Deadline
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
        writer.write_bytes(f"steps/{path.name}", tail_bytes(path, config.log_max_bytes))
    writer.source("steps", OK)


def tail_bytes(path: Path, limit: int) -> bytes:
    """The file's last `limit` bytes, starting at a line boundary when it had to be cut."""
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        if size <= limit:
            handle.seek(0)
            return handle.read()
        handle.seek(size - limit)
        data = handle.read()
    newline = data.find(b"\n")
    return data[newline + 1 :] if newline >= 0 else data
