"""The state store's database: one SQLAlchemy engine over sqlite (state.db in the data directory, shared by the
bot and the CLI) or PostgreSQL, the types every table uses, and the schema brought up to date by the migrations.

Every Database over one URL in a process shares that URL's engine (one pool, one set of connections), for as long
as any of them lives.

The types are portable, so both databases behave the same. Rows come back as frozen dataclasses, never ORM
objects, so nothing holds a connection after a call returns.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    DateTime,
    Dialect,
    Engine,
    Row,
    Table,
    TypeDecorator,
    create_engine,
    event,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from actions.errors import BadRequest, Unavailable
from actions.service_failure import without_credentials
from actions.settings import SettingsError

# How a lock held by the other process (bot or CLI) is waited for before sqlite gives up.
SQLITE_BUSY_TIMEOUT_MS = 10_000
# Tries at switching a fresh file to WAL while other connections race to do the same.
WAL_ATTEMPTS = 10
# PostgreSQL's codes for a statement it ended at a timeout, and the class of its connection errors.
SERVER_TIMEOUTS = {"57014": "statement_timeout", "55P03": "lock_timeout"}
CONNECTION_EXCEPTION_CLASS = "08"
# Connections an engine keeps open. One engine serves every service of a process, so there is one for each
# thread that may hold one at once (waitress's 8, the Slack work pools, the pollers): more would be opened and
# closed again on every use.
POOL_SIZE = 20
# The engine of each state store URL this process opened, while a Database holds it.
_ENGINES: weakref.WeakValueDictionary[str, Engine] = weakref.WeakValueDictionary()
_ENGINES_LOCK = threading.Lock()


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


# Both dialects spell an upsert the same way (ON CONFLICT), which keeps the name check atomic.
INSERTS: dict[str, Callable[[Table], sqlite.Insert | postgresql.Insert]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}


class Database:
    """The state store URL's engine (one per URL in the process); its tables are in actions/state/tables.py
    (the migrations make them)."""

    def __init__(self, url: str) -> None:
        self.engine = shared_engine(url)
        # The dialect's INSERT, which has ON CONFLICT DO NOTHING.
        self._insert = INSERTS[self.engine.dialect.name]

    def close(self) -> None:
        """Close the engine's pooled connections (every Database over this URL opens new ones when next used)."""
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
        from actions.state.migrations import upgrade  # noqa: PLC0415 - Alembic loads only where a store is opened

        upgrade(self.engine)


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


def shared_engine(url: str) -> Engine:
    """The process's engine over `url`: made on first use, shared by every Database over the same URL."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is None:
            engine = _ENGINES[url] = _create_engine(_parse_url(url))
        return engine


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
        engine = create_engine(url, pool_size=POOL_SIZE)
        event.listen(engine, "handle_error", _unreachable_server)
        return engine
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_size=POOL_SIZE)
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
