"""Every channel message the bot posts or edits goes through one SlackPoster: paced to about one a second
per channel (Slack's guidance for chat.postMessage), and remembered by key so that a later change edits
the message or replies in its thread, across restarts. A 429 is waited out by the WebClient's own
RateLimitErrorRetryHandler, which honours Retry-After (`paced_client`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from actions.state.posts import Post, SlackPosts

if TYPE_CHECKING:
    from bot.render.blocks import Message

CHANNEL_INTERVAL_S = 1.0
RATE_LIMIT_RETRIES = 3


def paced_client(token: str, base_url: str, timeout_s: float) -> WebClient:
    """A WebClient that waits out a 429 for as long as its Retry-After says, then tries again; each request
    (connecting, and each read) waits at most `timeout_s` (slack_sdk's default is 30 s, retried once)."""
    return WebClient(
        token=token,
        base_url=base_url,
        timeout=timeout_s,  # type: ignore[arg-type] - urllib takes a float; slack_sdk's hint says int
        retry_handlers=[ConnectionErrorRetryHandler(), RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES)],
    )


class ChannelPacer:
    """Hands out one slot per `interval_s` per channel; callers sleep until theirs, outside the lock."""

    def __init__(
        self,
        interval_s: float = CHANNEL_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.interval_s = interval_s
        self._clock, self._sleep = clock, sleep
        self._next_free: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait(self, channel: str) -> None:
        with self._lock:
            now = self._clock()
            slot = max(now, self._next_free.get(channel, now))
            self._next_free[channel] = slot + self.interval_s
        if slot > now:
            self._sleep(slot - now)


class SlackPoster:
    def __init__(self, client: WebClient, posts: SlackPosts, pacer: ChannelPacer | None = None) -> None:
        self.client = client
        self.posts = posts
        self._pacer = pacer or ChannelPacer()

    def post(self, channel: str, message: Message, key: str | None = None, thread: Post | None = None) -> Post:
        """Post `message` in `channel` (in `thread` when given); remembered under `key` when given."""
        self._pacer.wait(channel)
        answer = self.client.chat_postMessage(
            channel=channel, text=message.text, blocks=message.blocks, thread_ts=thread.ts if thread else None
        )
        post = Post(answer["channel"], answer["ts"])
        if key is not None:
            self.posts.remember(key, post, datetime.now(UTC))
        return post

    def upload(self, channel: str, content: bytes | str, filename: str, title: str, thread: Post | None = None) -> None:
        """Share a file in `channel` (in `thread` when given); paced like a message, since Slack posts one."""
        self._pacer.wait(channel)
        self.client.files_upload_v2(
            channel=channel, thread_ts=thread.ts if thread else None, content=content, filename=filename, title=title
        )

    def reply(self, key: str, message: Message) -> Post | None:
        """Reply in the thread of the message posted under `key`; None when there is none."""
        parent = self.posts.find(key)
        return None if parent is None else self.post(parent.channel, message, thread=parent)

    def update(self, key: str, message: Message) -> Post | None:
        """Edit the message posted under `key`; None when there is none."""
        post = self.posts.find(key)
        if post is not None:
            self._pacer.wait(post.channel)
            self.client.chat_update(channel=post.channel, ts=post.ts, text=message.text, blocks=message.blocks)
        return post

    def find(self, key: str) -> Post | None:
        return self.posts.find(key)
