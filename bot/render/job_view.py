"""Jobs as text for the terminal: a table of jobs, one job's status with its history, what a cancel did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from actions.jobs.job import JobStatus
from actions.jobs.records import Event, JobRecord

if TYPE_CHECKING:
    from actions.jobs.service import Cancellation
    from actions.jobs.sweep_progress import SweepProgress

COLUMNS = ("NAME", "STATE", "BACKEND", "TEMPLATE", "REQUESTER", "AGE")


def jobs_table(records: list[JobRecord]) -> str:
    if not records:
        return "no jobs yet; start one with: trainbot launch tiny-transformer"
    rows = [COLUMNS] + [(r.name, str(r.state), r.backend, r.template, r.requester, age(r.created_at)) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def status_text(status: JobStatus, history: list[Event]) -> str:
    lines = [f"{status.name}: {status.state}"]
    details = {
        "message": status.message,
        "reason": status.reason,
        "deployment": status.deployment_status,
        "cluster": status.cluster_name,
        "dashboard": status.dashboard_url,
        "started": status.start_time.isoformat(timespec="seconds") if status.start_time else "",
        "ended": status.end_time.isoformat(timespec="seconds") if status.end_time else "",
    }
    lines += [f"  {key}: {value}" for key, value in details.items() if value]
    if history:
        lines.append("  history:")
        lines += [
            f"    {event.at.isoformat(timespec='seconds')}  {event.state}  {event.message}".rstrip()
            for event in history
        ]
    return "\n".join(lines)


def cancellation_text(cancellation: Cancellation) -> str:
    """One line, for the terminal and Slack alike: the state now and whether a stop (or suspend) was asked."""
    status, action = cancellation.status, cancellation.action
    if cancellation.requested:
        return f"{status.name}: {status.state} ({action} requested)"
    return f"{status.name}: already {status.state}; nothing to {action}"


@dataclass(frozen=True)
class SweepSummary:
    """Where a sweep stands, as Slack's progress message and the terminal's progress line say it."""

    done: int
    trials: int
    running: int
    best: str  # "best val_loss 0.912 (trial-3)", or "" before any trial reported the metric

    def __str__(self) -> str:
        counts = f"{self.done}/{self.trials} trials done, {self.running} running"
        return f"{counts}, {self.best}" if self.best else counts


def sweep_summary(progress: SweepProgress, trials: int) -> SweepSummary:
    """`trials`: as asked (0 if unknown); more runs than that (Tune's retries) count as no more than all done."""
    done = min(progress.finished, trials) if trials else progress.finished
    best = progress.best
    best_text = f"best {progress.metric} {best.value:.4g} ({best.name})" if best and best.value is not None else ""
    return SweepSummary(done, trials, progress.running, best_text)


def age(created: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"
