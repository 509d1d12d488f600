"""The state store's schema, versioned with Alembic: the tables of every Database in one chain of
revisions (versions/, written by hand, run on sqlite and PostgreSQL alike), brought to the newest on
every start. The upgrade holds a lock (PostgreSQL's advisory lock, sqlite's write lock) from reading
the version to committing, so processes starting together (the bot, the CLI, replicas) migrate once.
A database made before versioning began is stamped with the revision its tables show (legacy.py).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, func, inspect, select, text

from actions.migrations.legacy import shown_revision
from actions.settings import SettingsError

# Not Alembic's default name: MLflow keeps its own alembic_version, maybe in the same database.
VERSION_TABLE = "trainbot_alembic_version"
# PostgreSQL's advisory locks are one 64-bit key per database: this one is trainbot's migration.
ADVISORY_LOCK_KEY = 0x7472_6169_6E62_6F74  # "trainbot"

_LOADING = threading.Lock()


@dataclass(frozen=True)
class Revisions:
    """The revision the database is at (None: not versioned yet) and the newest this trainbot has."""

    current: str | None
    head: str

    def to_dict(self) -> dict[str, Any]:
        return {"current": self.current, "head": self.head}


def revisions(engine: Engine) -> Revisions:
    with engine.connect() as connection:
        return Revisions(_current(connection), _head())


@dataclass(frozen=True)
class Upgrade:
    """What an upgrade did: the revision the database was at (or, `stamped`, was recognised at) and is at now."""

    previous: str | None
    current: str
    stamped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"previous": self.previous, "current": self.current, "stamped": self.stamped}


def upgrade(engine: Engine) -> Upgrade:
    """Bring the database to head; a database from before versioning is stamped first."""
    head = _head()
    with engine.connect() as connection:
        current = _known(_current(connection))
    if current == head:
        return Upgrade(current, head)
    with _locked(engine) as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": VERSION_TABLE, "fn": lambda at, _: _scripts()._upgrade_revs(head, at)}
        )
        current = _known(context.get_current_revision())
        stamped = current is None and (current := shown_revision(connection)) is not None
        if stamped:
            context.stamp(_scripts(), current)
        with Operations.context(context):
            context.run_migrations()
    return Upgrade(current, head, stamped)


@contextmanager
def _locked(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that holds the migration lock until it commits."""
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(select(func.pg_advisory_xact_lock(ADVISORY_LOCK_KEY)))
            yield connection
            connection.commit()
            return
        # Batch mode copies a table and drops the old one: with foreign keys on, dropping jobs would delete
        # every job_events row (ON DELETE CASCADE). sqlite takes this pragma only outside a transaction.
        connection.exec_driver_sql("PRAGMA foreign_keys = OFF")
        try:
            # The write lock, taken now rather than at the first write: another process waits here (the
            # busy timeout), then reads the version this one wrote. The DDL is in the transaction.
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            yield connection
            connection.commit()
        finally:
            connection.rollback()
            connection.exec_driver_sql("PRAGMA foreign_keys = ON")


def _current(connection: Connection) -> str | None:
    # Read directly: a MigrationContext logs its dialect at INFO, and this runs for every store opened.
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.scalar(text(f"SELECT version_num FROM {VERSION_TABLE}"))


def _known(revision: str | None) -> str | None:
    if revision is not None:
        try:
            _scripts().get_revision(revision)
        except CommandError:
            raise SettingsError(
                f"the state store is at schema revision {revision}, which this trainbot does not have: a newer "
                "trainbot upgraded it; run that version or newer"
            ) from None
    return revision


def _head() -> str:
    head = _scripts().get_current_head()
    assert head is not None, "the migrations have one head"
    return head


def _scripts() -> ScriptDirectory:
    """The revisions, loaded once per process; the lock keeps threads from importing them twice at once."""
    with _LOADING:
        return _loaded_scripts()


@functools.cache
def _loaded_scripts() -> ScriptDirectory:
    scripts = ScriptDirectory(str(Path(__file__).parent))
    scripts.get_current_head()  # imports every revision now, under the lock
    return scripts
