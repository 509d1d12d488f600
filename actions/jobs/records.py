"""The jobs trainbot launched, each job's state history, and the watcher's cursors, in the state store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Connection,
    select,
    update,
)

from actions.errors import BadRequest, Conflict, NotFound
from actions.jobs.job import JobState, JobStatus, Launch
from actions.state.database import Database
from actions.state.tables import TEXT_FIELDS, TIME_FIELDS, cursors, job_events, jobs

DETAIL_FIELDS = (*TEXT_FIELDS, *TIME_FIELDS)
# KubeRay clears reason and message when it retries a job; the jobs row keeps the last ones said.
STICKY_FIELDS = ("reason", "message")
ACTIVE_STATES = tuple(state.value for state in JobState if not state.terminal)
# Candidates an ambiguous prefix lists.
MAX_CANDIDATES = 10
# Each failed compare-and-set means another writer changed the job meanwhile, so this is never reached
# in practice; it only bounds the loop.
MAX_RECORD_ATTEMPTS = 5
LIST_HINT = "`trainbot jobs` lists them"


@dataclass(frozen=True, kw_only=True)
class JobRecord(JobStatus):
    """A job trainbot launched: its latest known status (the JobStatus fields) and what was asked for."""

    backend: str
    kind: str
    template: str
    requester: str
    params: dict[str, Any]
    workers: int
    gpus_per_worker: int
    entrypoint: str
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "backend": self.backend,
            "kind": self.kind,
            "template": self.template,
            "requester": self.requester,
            "params": self.params,
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "entrypoint": self.entrypoint,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True, kw_only=True)
class Event(JobStatus):
    """One status of a job (the JobStatus fields) exactly as observed when its state changed."""

    id: int
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "id": self.id, "at": self.at.isoformat()}


@dataclass(frozen=True)
class Transition:
    """Job `job` went from `previous` (None: it had no state yet) to `current`; `status` is what was observed."""

    job: str
    previous: JobState | None
    current: JobState
    status: JobStatus
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "previous": self.previous.value if self.previous else None,
            "current": self.current.value,
            "at": self.at.isoformat(),
            "status": self.status.to_dict(),
        }


class Store(Database):
    """The jobs, their history and the cursors in one database; every method is one transaction."""

    def record_launch(self, launch: Launch, backend: str, status: JobStatus) -> JobRecord:
        """The new job's row and its first event; Conflict if the name is taken."""
        if status.name != launch.name:
            raise ValueError(f"status of {status.name!r} given for the launch of {launch.name!r}")
        now = _now()
        row = {
            "name": launch.name,
            "backend": backend,
            "kind": launch.kind,
            "template": launch.template.name,
            "requester": launch.requester,
            "params": launch.params,
            "workers": launch.workers,
            "gpus_per_worker": launch.gpus_per_worker,
            "entrypoint": launch.entrypoint,
            "created_at": now,
            "updated_at": now,
            **_status_values(status),
        }
        with self.engine.begin() as conn:
            if self.insert_new(conn, jobs, row) is None:
                raise Conflict(f"a job named {launch.name} already exists; launch again for a fresh name")
            _append_event(conn, status, now)
            return _read_job(conn, launch.name)

    def get(self, name: str) -> JobRecord:
        with self.engine.connect() as conn:
            return _read_job(conn, name)

    def known(self, name: str) -> bool:
        """Whether trainbot launched a job of this name."""
        with self.engine.connect() as conn:
            return conn.scalar(select(jobs.c.name).where(jobs.c.name == name)) is not None

    def find(self, name_or_prefix: str) -> JobRecord:
        """The job of that name, else the only one whose name starts so (people type a prefix)."""
        if not name_or_prefix:
            raise BadRequest(f"name a job (its first letters are enough); {LIST_HINT}")
        query = (
            select(jobs.c.name)
            .where(jobs.c.name.startswith(name_or_prefix, autoescape=True))
            .order_by(jobs.c.name)
            .limit(MAX_CANDIDATES + 1)
        )
        with self.engine.connect() as conn:
            # sqlite's LIKE ignores ASCII case; the comparison here does not.
            names = [name for name in conn.scalars(query) if name.startswith(name_or_prefix)]
            if name_or_prefix in names or len(names) == 1:
                return _read_job(conn, name_or_prefix if name_or_prefix in names else names[0])
        if not names:
            raise NotFound(f"no job named or starting with {name_or_prefix!r}; {LIST_HINT}")
        shown = ", ".join(names[:MAX_CANDIDATES]) + (", …" if len(names) > MAX_CANDIDATES else "")
        raise BadRequest(f"{name_or_prefix!r} starts several job names ({shown}); type more of the name")

    def list_jobs(self, limit: int = 50, requester: str | None = None, active: bool = False) -> list[JobRecord]:
        """Newest first; `active` keeps the jobs not yet finished."""
        query = select(jobs).order_by(jobs.c.created_at.desc(), jobs.c.name.desc()).limit(limit)
        if requester is not None:
            query = query.where(jobs.c.requester == requester)
        if active:
            query = query.where(jobs.c.state.in_(ACTIVE_STATES))
        with self.engine.connect() as conn:
            return [_job_record(row) for row in conn.execute(query).mappings()]

    def record_status(self, status: JobStatus) -> Transition | None:
        """Record what a backend observed; the Transition when the state changed, reported once.

        Two watchers may record the same observation at once: the row is updated only if it still
        has the state that was read (compare-and-set), so exactly one of them sees the change.
        A job trainbot did not launch is not tracked: None.
        """
        for _ in range(MAX_RECORD_ATTEMPTS):
            with self.engine.begin() as conn:
                # Only the status columns: the row's params may be large and this runs on every observation.
                query = select(jobs.c.state, *(jobs.c[field] for field in DETAIL_FIELDS))
                stored = conn.execute(query.where(jobs.c.name == status.name)).mappings().first()
                if stored is None:
                    return None
                previous = JobState(stored["state"])
                values = _status_values(status)
                for field in STICKY_FIELDS:
                    values[field] = values[field] or stored[field]
                if all(stored[key] == value for key, value in values.items()):
                    return None
                now = _now()
                compare_and_set = (
                    update(jobs)
                    .where(jobs.c.name == status.name, jobs.c.state == previous.value)
                    .values(**values, updated_at=now)
                )
                if conn.execute(compare_and_set).rowcount == 0:
                    continue  # another watcher changed the state since we read it: compare again
                if status.state == previous:
                    return None
                _append_event(conn, status, now)
                return Transition(status.name, previous, status.state, status, now)
        raise Conflict(f"job {status.name} kept changing while its status was recorded; it is recorded next time")

    def history(self, name: str) -> list[Event]:
        """Every state the job was seen in, oldest first, exactly as observed."""
        query = select(job_events).where(job_events.c.job_name == name).order_by(job_events.c.id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
            if not rows:
                _read_job(conn, name)  # NotFound for an unknown job; a known one has its launch event
        return [Event(name=name, id=row["id"], at=row["at"], **_status_fields(row)) for row in rows]

    def get_cursor(self, key: str) -> str | None:
        with self.engine.connect() as conn:
            return conn.scalar(select(cursors.c.value).where(cursors.c.key == key))

    def set_cursor(self, key: str, value: str) -> None:
        upsert = self._insert(cursors).values(key=key, value=value)
        upsert = upsert.on_conflict_do_update(index_elements=[cursors.c.key], set_={"value": value})
        with self.engine.begin() as conn:
            conn.execute(upsert)


def _now() -> datetime:
    return datetime.now(UTC)


def _status_values(status: JobStatus) -> dict[str, Any]:
    return {"state": status.state.value, **{field: getattr(status, field) for field in DETAIL_FIELDS}}


def _status_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    """The JobStatus fields but the name, from a jobs or a job_events row."""
    return {"state": JobState(row["state"]), **{field: row[field] for field in DETAIL_FIELDS}}


def _job_record(row: Mapping[str, Any]) -> JobRecord:
    return JobRecord(
        name=row["name"],
        backend=row["backend"],
        kind=row["kind"],
        template=row["template"],
        requester=row["requester"],
        params=row["params"],
        workers=row["workers"],
        gpus_per_worker=row["gpus_per_worker"],
        entrypoint=row["entrypoint"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        **_status_fields(row),
    )


def _read_job(conn: Connection, name: str) -> JobRecord:
    row = conn.execute(select(jobs).where(jobs.c.name == name)).mappings().first()
    if row is None:
        raise NotFound(f"no job named {name!r}; {LIST_HINT}")
    return _job_record(row)


def _append_event(conn: Connection, status: JobStatus, at: datetime) -> None:
    conn.execute(job_events.insert().values(job_name=status.name, at=at, **_status_values(status)))
