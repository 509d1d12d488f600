"""Jobs as text for the terminal: a table of jobs, one job's status with its history, what a cancel did."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from actions.jobs.job import JobStatus
from actions.jobs.records import Event, JobRecord

if TYPE_CHECKING:
    from actions.jobs.service import Cancellation

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


def age(created: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"
