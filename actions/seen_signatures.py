"""Slack request signatures already taken, so a signed request sent again within its 5-minute window is
refused: one row per signature until its window has passed, in the state store, so every worker and
replica sees the same set. The insert is the check: exactly one caller inserts a given signature."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index, MetaData, String, Table, delete, event, text

from actions.store import Database, UTCDateTime

metadata = MetaData()

seen = Table(
    "slack_seen_signatures",
    metadata,
    # The hex HMAC-SHA256 of Slack's v0 signature.
    Column("signature", String(64), primary_key=True),
    # After this the request's timestamp is out of its window, so the signature cannot be accepted again anyway.
    Column("expires_at", UTCDateTime(), nullable=False),
    Index("slack_seen_signatures_expires_at", "expires_at"),
)


class SeenSignatures(Database):
    """Every Slack request waits on this insert before its ack, so its commit does not wait for the disk: a
    crash of the process loses nothing, and a crash of the machine at most the last signatures, whose
    requests would be in their window for at most 5 minutes more."""

    schema = metadata

    def __init__(self, url: str) -> None:
        super().__init__(url)
        if self.engine.dialect.name == "sqlite":
            # In WAL mode NORMAL syncs at checkpoints, not at each commit: 0.3 ms an insert here instead of 1.8.
            event.listen(self.engine, "connect", _commit_without_sync)

    def first_sight(self, signature: str, expires_at: datetime, now: datetime) -> bool:
        """Record `signature` until `expires_at`; True only for the first caller to record it."""
        with self.engine.begin() as conn:
            if self.engine.dialect.name == "postgresql":
                conn.execute(text("SET LOCAL synchronous_commit TO OFF"))
            # Rows past their window are dead weight; the index makes this a no-op when there are none.
            conn.execute(delete(seen).where(seen.c.expires_at < now))
            insert = self._insert(seen).values(signature=signature, expires_at=expires_at).on_conflict_do_nothing()
            return bool(conn.execute(insert).rowcount)


def _commit_without_sync(dbapi_connection: Any, _connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()
