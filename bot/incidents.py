"""Incidents: a failure the person in front of trainbot cannot fix (a bug, a service answering as no one
expected), handled alike by the CLI, Slack and the web server. It is counted, its traceback kept where an
operator reads it (the bot's log; for the CLI, which has no log, a report file), and the person is told only
its id, which finds the traceback.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Incident:
    id: str
    # The file holding its traceback; None where the traceback went to the log.
    report: Path | None = None


def record_incident(
    on: str,
    *,
    count: Callable[[], None] | None = None,
    report_dir: Path | None = None,
    incident_id: str | None = None,
) -> Incident:
    """Record the exception being handled as an incident on `on` (the request or command that failed): counted
    by `count`, its traceback in the log, or in a report file in `report_dir`, under `incident_id` (else a new id).
    """
    incident = incident_id or uuid.uuid4().hex[:12]
    if count is not None:
        count()
    if report_dir is None:
        log.exception("incident %s on %s", incident, on)
        return Incident(incident)
    report = report_dir / f"incident-{incident}.log"
    report.write_text(f"incident {incident} on {on}\n{traceback.format_exc()}", encoding="utf-8")
    return Incident(incident, report)
