"""Where the bot posted about something (a promotion request, later a job or an alert group), so a
later change edits that message or replies in its thread, across restarts. Keys are "<kind>:<id>".

Several bots may serve one state store (two `trainbot serve` replicas on PostgreSQL): a poster that reads
what is unposted and then posts it takes its turn first (`claim`), so only one of them posts it. A turn
is a slack_posts row without a message (`ts` empty) whose `posted_at` is when the turn lapses, so a bot
that died holding one holds it only that long."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Column, MetaData, String, Table, delete, select, update

from actions.state.database import Database, UTCDateTime

# A poster's round takes seconds; a bot that died in one keeps the others from posting for this long.
TURN_LEASE = timedelta(minutes=2)

metadata = MetaData()

posts = Table(
    "slack_posts",
    metadata,
    Column("key", String(300), primary_key=True),
    Column("channel", String(64), nullable=False),
    Column("ts", String(32), nullable=False),
    Column("posted_at", UTCDateTime(), nullable=False),
)

# What a post last showed (a job's state, say), so each change is told once however many watchers see it.
shown = Table(
    "slack_shown",
    metadata,
    Column("key", String(300), primary_key=True),
    Column("state", String(64), nullable=False),
)


@dataclass(frozen=True)
class Post:
    channel: str
    ts: str


class SlackPosts(Database):
    schema = metadata

    def remember(self, key: str, post: Post, at: datetime) -> None:
        """Record the post for `key`; the first one stays (a thread has one parent)."""
        insert = self._insert(posts).values(key=key, channel=post.channel, ts=post.ts, posted_at=at)
        with self.engine.begin() as conn:
            conn.execute(insert.on_conflict_do_nothing())

    def claim(self, turn: str, at: datetime, lease: timedelta) -> bool:
        """Take `turn` until `at + lease`; False while another caller holds it."""
        until = at + lease
        with self.engine.begin() as conn:
            if self.insert_new(conn, posts, {"key": turn, "channel": "", "ts": "", "posted_at": until}) is not None:
                return True
            lapsed = update(posts).where(posts.c.key == turn, posts.c.ts == "", posts.c.posted_at <= at)
            return conn.execute(lapsed.values(posted_at=until)).rowcount == 1

    def release(self, turn: str) -> None:
        """Give `turn` back, so the next caller need not wait for the lease to run out."""
        with self.engine.begin() as conn:
            conn.execute(delete(posts).where(posts.c.key == turn, posts.c.ts == ""))

    @contextmanager
    def turn(self, turn: str, lease: timedelta = TURN_LEASE) -> Iterator[bool]:
        """Whether this caller holds `turn` for the block (see the module's docstring); given back after it."""
        if not self.claim(turn, datetime.now(UTC), lease):
            yield False
            return
        try:
            yield True
        finally:
            self.release(turn)

    def find(self, key: str) -> Post | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(posts.c.channel, posts.c.ts).where(posts.c.key == key)).first()
        return Post(row.channel, row.ts) if row else None

    def show(self, key: str, state: str) -> bool:
        """Record that `key` now shows `state`; True only for the one caller that changed it."""
        with self.engine.begin() as conn:
            changed = conn.execute(update(shown).where(shown.c.key == key, shown.c.state != state).values(state=state))
            if changed.rowcount:
                return True
            return self.insert_new(conn, shown, {"key": key, "state": state}) is not None

    def showing_other_than(self, prefix: str, states: Collection[str]) -> list[str]:
        """Keys starting with `prefix` whose post shows none of `states` (jobs whose thread is not at an end)."""
        query = select(shown.c.key).where(shown.c.key.startswith(prefix, autoescape=True), shown.c.state.not_in(states))
        with self.engine.connect() as conn:
            return list(conn.execute(query).scalars())
