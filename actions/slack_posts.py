"""Where the bot posted about something (a promotion request, later a job or an alert group), so a
later change edits that message or replies in its thread, across restarts. Keys are "<kind>:<id>"."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, MetaData, String, Table, select, update

from actions.store import Database, UTCDateTime

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
