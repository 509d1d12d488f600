"""The state store: the jobs trainbot launched, each job's state history, and the watcher's cursors.

One SQLAlchemy engine over sqlite (state.db in the data directory, shared by the bot and the CLI)
or PostgreSQL; the types are portable, so both behave the same. Rows come back as frozen
dataclasses, never ORM objects, so nothing holds a connection after a call returns.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    DateTime,
    Dialect,
    Engine,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Row,
    String,
    Table,
    Text,
    TypeDecorator,
    create_engine,
    event,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from actions.errors import BadRequest, Conflict, NotFound, Unavailable
from actions.jobs import JobState, JobStatus, Launch
from actions.service_failure import without_credentials
from actions.settings import SettingsError

TEXT_FIELDS = ("message", "reason", "deployment_status", "dashboard_url", "cluster_name", "submission_id")
TIME_FIELDS = ("start_time", "end_time")
DETAIL_FIELDS = (*TEXT_FIELDS, *TIME_FIELDS)
# KubeRay clears reason and message when it retries a job; the jobs row keeps the last ones said.
STICKY_FIELDS = ("reason", "message")
ACTIVE_STATES = tuple(state.value for state in JobState if not state.terminal)
# How a lock held by the other process (bot or CLI) is waited for before sqlite gives up.
SQLITE_BUSY_TIMEOUT_MS = 10_000
# Tries at switching a fresh file to WAL while other connections race to do the same.
WAL_ATTEMPTS = 10
# PostgreSQL's codes for a statement it ended at a timeout, and the class of its connection errors.
SERVER_TIMEOUTS = {"57014": "statement_timeout", "55P03": "lock_timeout"}
CONNECTION_EXCEPTION_CLASS = "08"
# Candidates an ambiguous prefix lists.
MAX_CANDIDATES = 10
# Each failed compare-and-set means another writer changed the job meanwhile, so this is never reached
# in practice; it only bounds the loop.
MAX_RECORD_ATTEMPTS = 5
LIST_HINT = "`trainbot jobs` lists them"


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware datetime, stored and read back as UTC (sqlite keeps no zone of its own)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            # A naive time would be read back as UTC whatever zone it was meant in.
            raise ValueError(f"naive datetime {value.isoformat()}: the state store takes timezone-aware times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _status_columns() -> list[Column[Any]]:
    """A JobStatus but its name: the latest one in the jobs row, each observed one in job_events."""
    return [
        Column("state", String(16), nullable=False),
        *(Column(field, Text, nullable=False) for field in TEXT_FIELDS),
        *(Column(field, UTCDateTime) for field in TIME_FIELDS),
    ]


metadata = MetaData()

jobs = Table(
    "jobs",
    metadata,
    # Our job names are DNS-1035 labels of at most 47 characters (actions.jobs.MAX_JOB_NAME).
    Column("name", String(63), primary_key=True),
    Column("backend", String(16), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("template", String(63), nullable=False),
    Column("requester", Text, nullable=False),
    Column("params", JSON, nullable=False),
    Column("workers", Integer, nullable=False),
    Column("gpus_per_worker", Integer, nullable=False),
    Column("entrypoint", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    *_status_columns(),
    Index("jobs_created_at", "created_at"),
    Index("jobs_state", "state"),
)

job_events = Table(
    "job_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_name", String(63), ForeignKey("jobs.name", ondelete="CASCADE"), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    *_status_columns(),
    Index("job_events_job_name_id", "job_name", "id"),
)

cursors = Table(
    "cursors",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("value", Text, nullable=False),
)

# Both dialects spell an upsert the same way (ON CONFLICT), which keeps the name check atomic.
INSERTS: dict[str, Callable[[Table], sqlite.Insert | postgresql.Insert]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}


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


class Database:
    """One engine over the state store URL; `schema` holds the tables this class uses (the migrations make them)."""

    schema: ClassVar[MetaData]

    def __init__(self, url: str) -> None:
        self.engine = _create_engine(_parse_url(url))
        # The dialect's INSERT, which has ON CONFLICT DO NOTHING.
        self._insert = INSERTS[self.engine.dialect.name]

    def close(self) -> None:
        self.engine.dispose()

    def insert_new(
        self, conn: Connection, table: Table, values: Mapping[str, Any], conflict: Sequence[str] | None = None
    ) -> Row[Any] | None:
        """Insert the row unless one with the same key (`conflict`, else any unique one) exists: the new
        row's primary key, or None when it was there already.

        RETURNING, not rowcount: psycopg reports -1 for INSERT ... ON CONFLICT DO NOTHING whether it
        inserted or not; both dialects return the row only when it was inserted (sqlite since 3.35).
        """
        check_lengths(table, values)
        insert = self._insert(table).values(values).on_conflict_do_nothing(index_elements=conflict)
        return conn.execute(insert.returning(*table.primary_key.columns)).first()

    def create_schema(self) -> None:
        """Bring the database (every Database's tables) to the newest schema revision. Safe on every start,
        also when the bot and the CLI start at once; a database from before versioning is recognised."""
        from actions.migrations import upgrade  # noqa: PLC0415 - Alembic loads only where a store is opened

        upgrade(self.engine)


class Store(Database):
    """The jobs, their history and the cursors in one database; every method is one transaction."""

    schema = metadata

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


def check_lengths(table: Table, values: Mapping[str, Any]) -> None:
    """BadRequest for a text longer than its column, before writing it: PostgreSQL would refuse it with
    an error, sqlite would keep it whole; this way both dialects answer the same."""
    for name, value in values.items():
        limit = getattr(table.c[name].type, "length", None)
        if isinstance(value, str) and limit is not None and len(value) > limit:
            raise BadRequest(
                f"the {name.replace('_', ' ')} {value[:20]!r}… is {len(value)} characters long; "
                f"the state store keeps at most {limit}"
            )


def _parse_url(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        # The URL may hold a password, so it is not repeated.
        raise SettingsError(
            "the state store URL is not a database URL (e.g. postgresql+psycopg://user@host/trainbot); "
            "fix TRAINBOT_STATE_STORE_URL"
        ) from None
    if parsed.get_backend_name() not in INSERTS:
        raise SettingsError(
            f"the state store cannot use {parsed.get_backend_name()}; "
            "set TRAINBOT_STATE_STORE_URL to a sqlite or postgresql URL"
        )
    return parsed


def _create_engine(url: URL) -> Engine:
    if url.get_backend_name() != "sqlite":
        engine = create_engine(url)
        event.listen(engine, "handle_error", _unreachable_server)
        return engine
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _unreachable_server(context: ExceptionContext) -> Unavailable | None:
    """One line naming the server for a connection that failed or timed out and a statement the server ended
    at its statement or lock timeout (Settings.state_url sets them); None leaves any other error as it is."""
    sqlstate = getattr(context.original_exception, "sqlstate", None)
    if not isinstance(context.sqlalchemy_exception, OperationalError):
        return None
    url = context.engine.url if context.engine else None
    server = f"PostgreSQL at {without_credentials(url.render_as_string(hide_password=False))}" if url else "PostgreSQL"
    if sqlstate in SERVER_TIMEOUTS:
        return Unavailable(f"{server} ended a statement at its {SERVER_TIMEOUTS[sqlstate]}; try again shortly")
    if sqlstate is not None and not sqlstate.startswith(CONNECTION_EXCEPTION_CLASS):
        return None
    first_line = (str(context.original_exception).strip().splitlines() or ["no answer"])[0]
    timeout = url.query.get("connect_timeout") if url else None
    reason = f"no answer within {timeout} s" if "timeout" in first_line and timeout else first_line.split(": ")[-1]
    return Unavailable(
        f"{server} cannot be reached ({reason}); check that it is up and that TRAINBOT_STATE_STORE_URL names it"
    )


def _sqlite_pragmas(dbapi_connection: Any, _connection_record: Any) -> None:
    # WAL lets the CLI read while the bot writes; the busy timeout makes a writer wait for the
    # other's lock instead of failing. The timeout comes first: switching to WAL takes a lock.
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


def _switch_to_wal(cursor: Any) -> None:
    """Connections racing to switch a fresh file to WAL can get "database is locked" at once: sqlite
    answers a lock upgrade that could deadlock without calling the busy handler. Seen once in CI with
    4 processes starting together; a short retry settles it (the file stays in WAL once switched)."""
    for attempt in range(WAL_ATTEMPTS):
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == WAL_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


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
