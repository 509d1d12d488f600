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

from sqlalchemy import delete, select, update

from actions.state.database import Database
from actions.state.tables import slack_posts, slack_shown

# A poster's round takes seconds; a bot that died in one keeps the others from posting for this long.
TURN_LEASE = timedelta(minutes=2)


@dataclass(frozen=True)
class Post:
    channel: str
    ts: str


class SlackPosts(Database):
    def remember(self, key: str, post: Post, at: datetime) -> None:
        """Record the post for `key`; the first one stays (a thread has one parent)."""
        insert = self._insert(slack_posts).values(key=key, channel=post.channel, ts=post.ts, posted_at=at)
        with self.engine.begin() as conn:
            conn.execute(insert.on_conflict_do_nothing())

    def claim(self, turn: str, at: datetime, lease: timedelta) -> bool:
        """Take `turn` until `at + lease`; False while another caller holds it."""
        until = at + lease
        with self.engine.begin() as conn:
            if (
                self.insert_new(conn, slack_posts, {"key": turn, "channel": "", "ts": "", "posted_at": until})
                is not None
            ):
                return True
            lapsed = update(slack_posts).where(
                slack_posts.c.key == turn, slack_posts.c.ts == "", slack_posts.c.posted_at <= at
            )
            return conn.execute(lapsed.values(posted_at=until)).rowcount == 1

    def release(self, turn: str) -> None:
        """Give `turn` back, so the next caller need not wait for the lease to run out."""
        with self.engine.begin() as conn:
            conn.execute(delete(slack_posts).where(slack_posts.c.key == turn, slack_posts.c.ts == ""))

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
            row = conn.execute(select(slack_posts.c.channel, slack_posts.c.ts).where(slack_posts.c.key == key)).first()
        return Post(row.channel, row.ts) if row else None

    def show(self, key: str, state: str) -> bool:
        """Record that `key` now shows `state`; True only for the one caller that changed it."""
        with self.engine.begin() as conn:
            changed = conn.execute(
                update(slack_shown).where(slack_shown.c.key == key, slack_shown.c.state != state).values(state=state)
            )
            if changed.rowcount:
                return True
            return self.insert_new(conn, slack_shown, {"key": key, "state": state}) is not None

    def showing_other_than(self, prefix: str, states: Collection[str]) -> list[str]:
        """Keys starting with `prefix` whose post shows none of `states` (jobs whose thread is not at an end)."""
        query = select(slack_shown.c.key).where(
            slack_shown.c.key.startswith(prefix, autoescape=True), slack_shown.c.state.not_in(states)
        )
        with self.engine.connect() as conn:
            return list(conn.execute(query).scalars())
