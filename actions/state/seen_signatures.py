"""Slack request signatures already taken, so a signed request sent again within its 5-minute window is
refused: one row per signature until its window has passed, in the state store, so every worker and
replica sees the same set. The insert is the check: exactly one caller inserts a given signature."""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from sqlalchemy import delete, event, text

from actions.state.database import Database
from actions.state.tables import slack_seen_signatures

SWEEP_INTERVAL_S = 60.0


class SeenSignatures(Database):
    """Every Slack request's work waits on this insert, and the Slack workers are few, so its commit does not
    wait for the disk: a crash of the process loses nothing, and a crash of the machine at most the last
    signatures, whose requests would be in their window for at most 5 minutes more."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._next_sweep = 0.0
        self._writer: AbstractContextManager[object] = nullcontext()
        if self.engine.dialect.name == "sqlite":
            # In WAL mode NORMAL syncs at checkpoints, not at each commit: 0.3 ms an insert here instead of 1.8.
            event.listen(self.engine, "connect", _commit_without_sync)
            # sqlite takes one writer at a time and has the others sleep and retry (1, 2, 5, 10 ms...): in a burst
            # of 20 requests some waited up to 100 ms. This process's writers queue instead.
            self._writer = threading.Lock()

    def first_sight(self, signature: str, expires_at: datetime, now: datetime) -> bool:
        """Record `signature` until `expires_at`; True only for the first caller to record it."""
        with self._writer, self.engine.begin() as conn:
            if self.engine.dialect.name == "postgresql":
                conn.execute(text("SET LOCAL synchronous_commit TO OFF"))
            if time.monotonic() >= self._next_sweep:
                # Rows past their window are dead weight; a sweep a minute keeps the table at minutes of requests.
                self._next_sweep = time.monotonic() + SWEEP_INTERVAL_S
                conn.execute(delete(slack_seen_signatures).where(slack_seen_signatures.c.expires_at < now))
            return (
                self.insert_new(conn, slack_seen_signatures, {"signature": signature, "expires_at": expires_at})
                is not None
            )


def _commit_without_sync(dbapi_connection: Any, _connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()
