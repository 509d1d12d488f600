"""The upgrade itself, with Alembic: under a lock (PostgreSQL's advisory lock, sqlite's write lock) from
reading the version to committing, so processes starting together (the bot, the CLI, replicas) migrate
once; a database made before versioning is first stamped with the revision its tables show (legacy.py)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, func, select

from actions.settings import SettingsError
from actions.state.migrations import VERSION_TABLE, Upgrade
from actions.state.migrations.legacy import shown_revision

# PostgreSQL's advisory locks are one 64-bit key per database: this one is trainbot's migration.
ADVISORY_LOCK_KEY = 0x7472_6169_6E62_6F74  # "trainbot"

_LOADING = threading.Lock()


def upgrade_locked(engine: Engine, head: str) -> Upgrade:
    with locked(engine) as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": VERSION_TABLE, "fn": lambda at, _: scripts()._upgrade_revs(head, at)}
        )
        current = _known(context.get_current_revision())
        stamped = current is None and (current := shown_revision(connection)) is not None
        if stamped:
            context.stamp(scripts(), current)
        with Operations.context(context):
            context.run_migrations()
    return Upgrade(current, head, stamped)


@contextmanager
def locked(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that holds the migration lock until it commits."""
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            # The store's URL bounds every statement and lock wait (seconds); a migration, and waiting for
            # another process's migration, may take longer.
            connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
            connection.exec_driver_sql("SET LOCAL lock_timeout = 0")
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


def _known(revision: str | None) -> str | None:
    if revision is not None:
        try:
            scripts().get_revision(revision)
        except CommandError:
            raise SettingsError(
                f"the state store is at schema revision {revision}, which this trainbot does not have: a newer "
                "trainbot upgraded it; run that version or newer"
            ) from None
    return revision


def scripts() -> ScriptDirectory:
    """The revisions, loaded once per process; the lock keeps threads from importing them twice at once."""
    with _LOADING:
        return _loaded_scripts()


@functools.cache
def _loaded_scripts() -> ScriptDirectory:
    loaded = ScriptDirectory(str(Path(__file__).parent))
    loaded.get_current_head()  # imports every revision now, under the lock
    return loaded
