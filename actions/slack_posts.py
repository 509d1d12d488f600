"""Where the bot posted about something (a promotion request, later a job or an alert group), so a
later change edits that message or replies in its thread, across restarts. Keys are "<kind>:<id>"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, MetaData, String, Table, select

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
