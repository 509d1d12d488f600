"""The state store's schema, versioned with Alembic: the tables of every Database in one chain of
revisions (versions/, written by hand, run on sqlite and PostgreSQL alike), brought to the newest on
every start. A database already there is seen without Alembic (whose import costs the bot ~9 MB);
otherwise runner.py upgrades it under a lock, so processes starting together migrate once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, inspect, text

# Not Alembic's default name: MLflow keeps its own alembic_version, maybe in the same database.
VERSION_TABLE = "trainbot_alembic_version"
VERSIONS = Path(__file__).with_name("versions")


@dataclass(frozen=True)
class Revisions:
    """The revision the database is at (None: not versioned yet) and the newest this trainbot has."""

    current: str | None
    head: str

    def to_dict(self) -> dict[str, Any]:
        return {"current": self.current, "head": self.head}


@dataclass(frozen=True)
class Upgrade:
    """What an upgrade did: the revision the database was at (or, `stamped`, was recognised at) and is at now."""

    previous: str | None
    current: str
    stamped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"previous": self.previous, "current": self.current, "stamped": self.stamped}


def revisions(engine: Engine) -> Revisions:
    with engine.connect() as connection:
        return Revisions(current_revision(connection), head())


def upgrade(engine: Engine) -> Upgrade:
    """Bring the database to head; a database from before versioning is stamped first."""
    newest = head()
    with engine.connect() as connection:
        if current_revision(connection) == newest:
            return Upgrade(newest, newest)
    from actions.state.migrations.runner import upgrade_locked  # noqa: PLC0415 - Alembic loads only to migrate

    return upgrade_locked(engine, newest)


def head() -> str:
    """The newest revision. Each file in versions/ is named after its revision, numbered in the order of
    the chain (tests/unit/actions/test_migrations.py holds them to it)."""
    return max(path.stem for path in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))


def current_revision(connection: Connection) -> str | None:
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.scalar(text(f"SELECT version_num FROM {VERSION_TABLE}"))
