"""Alert threads in the alerts channel, posted in rounds from what actions/alerts/threads.py recorded.

A job's first alert opens its thread: the parent says where the job's alerts stand (firing since when,
or resolved) and carries "Silence 2h" when Alertmanager's URL is set; it is remembered in slack_posts
under `alert:<thread key>`, so threads outlive restarts. What comes later is a reply in the thread, and
a change of status (resolved, firing again, a new alert name) edits the parent too.

A round makes at most CALLS_PER_ROUND Slack calls, each paced by the SlackPoster (about one a second
per channel): at most one reply per thread, summing up all its new events, and at most OPENS_PER_ROUND
new threads; when more want to open, one digest counts the rest by job and alert name. So 500 alerts
in 10 s are all recorded but reach Slack as a few dozen messages. Events are marked posted after Slack
took them: a crash in between posts them again rather than never.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from bot.render.alert_messages import storm_digest, thread_news, thread_parent

if TYPE_CHECKING:
    from actions.alerts.threads import AlertThreads, ThreadNews
    from actions.state.posts import Post
    from bot.render.blocks import Message
    from bot.slack.poster import SlackPoster

log = logging.getLogger(__name__)

POLL_S = 2.0
# Slack calls in one round; at one a second per channel a round takes about this many seconds.
CALLS_PER_ROUND = 8
OPENS_PER_ROUND = 3
POST_KEY_PREFIX = "alert:"
ROUND_TURN = "turn:alert-poster"

# Told of each job thread that opens: (job, namespace, the parent post). It runs on the poster's thread,
# so it should hand slow work (collecting and diagnosing) to a worker of its own.
ThreadOpened = Callable[[str, str, "Post"], None]


def post_key(thread_key: str) -> str:
    """The slack_posts key of a thread's parent message."""
    return POST_KEY_PREFIX + thread_key


class AlertPoster:
    def __init__(
        self,
        poster: SlackPoster,
        threads: AlertThreads,
        channel: str,
        silenceable: bool,
        on_thread_opened: ThreadOpened | None = None,
        calls_per_round: int = CALLS_PER_ROUND,
        opens_per_round: int = OPENS_PER_ROUND,
    ) -> None:
        self.poster = poster
        self.threads = threads
        self.channel = channel
        self.silenceable = silenceable
        self.on_thread_opened = on_thread_opened
        self.calls_per_round = calls_per_round
        self.opens_per_round = opens_per_round

    def round(self) -> int:
        """Post what is new since the last round; the number of Slack calls made (none while another bot
        on this state store posts its round: both would open the same threads)."""
        with self.poster.posts.turn(ROUND_TURN) as ours:
            return self._post_news() if ours else 0

    def _post_news(self) -> int:
        opened: list[ThreadNews] = []
        unopened: list[ThreadNews] = []
        for news in self.threads.pending():
            (opened if self.poster.find(post_key(news.thread.key)) else unopened).append(news)
        room = min(self.opens_per_round, self.calls_per_round)
        if len(unopened) > room:
            room = min(room, self.calls_per_round - 1)  # the digest takes a call
        calls = 0
        try:
            for news in unopened[:room]:
                opened.append(self._open(news))
                calls += 1
            if unopened[room:]:
                calls += self._digest(unopened[room:])
            for news in opened:
                cost = 1 + self._headline_stale(news)
                if calls + cost > self.calls_per_round:
                    break  # the rest wait for the next round, where they are summed up with what comes
                calls += self._reply(news)
        except SlackApiError as error:
            log.warning("Slack refused an alert post to %s (%s); trying again next round", self.channel, error)
        return calls

    def _open(self, news: ThreadNews) -> ThreadNews:
        """Post the thread's parent; its events come as the thread's first reply (this round or the next)."""
        thread = news.thread
        post = self.poster.post(self.channel, self._parent(news), key=post_key(thread.key))
        self.threads.mark_announced(thread.key, thread.revision)
        if self.on_thread_opened is not None and thread.job:
            try:
                self.on_thread_opened(thread.job, thread.namespace, post)
            except Exception:
                log.exception("the hook for the alert thread of %s failed; the thread is open", thread.title)
        return replace(news, thread=replace(thread, announced_revision=thread.revision))

    def _digest(self, rest: Sequence[ThreadNews]) -> int:
        self.poster.post(self.channel, storm_digest(rest))
        self.threads.mark_posted((event.id for news in rest for event in news.events), _now())
        return 1

    def _reply(self, news: ThreadNews) -> int:
        key = post_key(news.thread.key)
        calls = 0
        if self._headline_stale(news):
            self.poster.update(key, self._parent(news))
            self.threads.mark_announced(news.thread.key, news.thread.revision)
            calls += 1
        self.poster.reply(key, thread_news(news.thread, news.events))
        self.threads.mark_posted((event.id for event in news.events), _now())
        return calls + 1

    def _headline_stale(self, news: ThreadNews) -> bool:
        return news.thread.announced_revision != news.thread.revision

    def _parent(self, news: ThreadNews) -> Message:
        return thread_parent(news.thread, self.silenceable, _now())


def start_alert_poster(alert_poster: AlertPoster, poll_s: float = POLL_S) -> threading.Event:
    """A daemon thread posting alert threads as alerts come; set the returned event to stop it."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(poll_s):
            try:
                alert_poster.round()
            except Exception:
                log.exception("posting alert threads failed; trying again in %s s", poll_s)

    threading.Thread(target=loop, name="alert-poster", daemon=True).start()
    return stop


def _now() -> datetime:
    return datetime.now(UTC)
