"""Scaling studies in the state store: one template run at several sizes, the job at each size, the status."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from sqlalchemy import Connection, select, update

from actions.errors import Conflict, NotFound
from actions.state.database import Database
from actions.state.tables import scale_studies

BatchMode = Literal["per-worker", "global"]
BATCH_MODES: tuple[BatchMode, ...] = ("per-worker", "global")


class StudyStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # every size ran and was measured
    FAILED = "failed"  # a point failed (or measured nothing): the study ended there


@dataclass(frozen=True, kw_only=True)
class NewStudy:
    """A study as asked for, before any of its jobs runs."""

    id: str
    template: str
    requester: str
    backend: str
    params: dict[str, Any]
    sizes: tuple[int, ...]  # workers at each size, smallest first
    gpus_per_worker: int
    batch_mode: BatchMode
    steps: int
    parallel: bool = False  # every point launched at once (so they competed), not one after another


@dataclass(frozen=True, kw_only=True)
class Study(NewStudy):
    """A scaling study as stored: what was asked for, the job launched at each size so far (in `sizes` order),
    its status."""

    jobs: tuple[str, ...]
    status: StudyStatus
    reason: str  # why it ended, where it failed
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "sizes": list(self.sizes),
            "jobs": list(self.jobs),
            "status": self.status.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


class StudyStore(Database):
    """The studies in one database; every method is one transaction."""

    def create(self, study: NewStudy) -> Study:
        """The new study, running with no job yet; Conflict if its id is taken."""
        now = datetime.now(UTC)
        row = {
            **asdict(study),
            "sizes": list(study.sizes),
            "jobs": [],
            "status": StudyStatus.RUNNING.value,
            "reason": "",
            "created_at": now,
            "updated_at": now,
        }
        with self.engine.begin() as conn:
            if self.insert_new(conn, scale_studies, row) is None:
                raise Conflict(f"a study named {study.id} already exists; start it again for a fresh name")
            return _read(conn, study.id)

    def add_job(self, study_id: str, job: str) -> Study:
        """The study with `job` as the job of its next size."""
        with self.engine.begin() as conn:
            jobs = [*_read(conn, study_id).jobs, job]
            conn.execute(_changed(study_id).values(jobs=jobs))
            return _read(conn, study_id)

    def finish(self, study_id: str, status: StudyStatus, reason: str = "") -> Study:
        with self.engine.begin() as conn:
            conn.execute(_changed(study_id).values(status=status.value, reason=reason))
            return _read(conn, study_id)

    def get(self, study_id: str) -> Study:
        with self.engine.connect() as conn:
            return _read(conn, study_id)


def _changed(study_id: str) -> Any:
    return update(scale_studies).where(scale_studies.c.id == study_id).values(updated_at=datetime.now(UTC))


def _read(conn: Connection, study_id: str) -> Study:
    row = conn.execute(select(scale_studies).where(scale_studies.c.id == study_id)).mappings().first()
    if row is None:
        raise NotFound(f"no scaling study is named {study_id}")
    return Study(
        **{
            **row,
            "params": dict(row["params"]),
            "sizes": tuple(row["sizes"]),
            "jobs": tuple(row["jobs"]),
            "status": StudyStatus(row["status"]),
        }
    )
