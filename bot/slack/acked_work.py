"""Slack listeners that ack at once and hand the work behind the ack to bounded pools of threads.

Bolt's lazy listeners would do the same, but each deep-copies the request, the per-request WebClient in
its context included, in the thread that acks: a quarter of the server's CPU per `/train status`, and
under a burst most of what made trainbot's acks slower than a bare Bolt app's (bench/ack_latency.py).
Here the work gets the request's body and client as Bolt made them; Bolt makes the client per request,
so the worker shares it with nobody.

Work bound for a backend (its lane: MLflow, jobs, diagnosis, Alertmanager) runs on that lane's own pool,
a bulkhead: when MLflow hangs, promotions wait on the MLflow threads while `/train help` and every other
lane still have theirs. Work of no lane runs on the general pool.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from slack_bolt import Ack, BoltRequest
from slack_sdk import WebClient

log = logging.getLogger(__name__)

# The work behind an ack: Slack's payload and the request's WebClient.
Work = Callable[[dict[str, Any], WebClient], None]
# Given the payload, what to ack with instead of running the work (a modal's field errors), or None.
Refusal = Callable[[dict[str, Any]], "dict[str, Any] | None"]
# Given the payload, the backend its work waits on (bot/slack/lanes.py), or None for the general pool.
Lane = Callable[[dict[str, Any]], "str | None"]
# Given the request, whether this is its first delivery to any replica (bot/slack/entry.py): work is done once.
FirstDelivery = Callable[[BoltRequest], bool]


def _no_refusal(body: dict[str, Any]) -> dict[str, Any] | None:
    return None


def _general(body: dict[str, Any]) -> str | None:
    return None


def _always_first(request: BoltRequest) -> bool:
    return True


class AckedWork:
    """Bounded pools behind the acks: a burst queues here rather than piling up threads."""

    def __init__(self, workers: int, lane_workers: int, first_delivery: FirstDelivery = _always_first) -> None:
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="slack-work")
        self._first_delivery = first_delivery
        self._lane_workers = lane_workers
        self._lanes: dict[str, ThreadPoolExecutor] = {}
        self._lanes_lock = threading.Lock()
        # Acked and not yet done, for a graceful stop.
        self._pending: set[Future[None]] = set()
        self._lock = threading.Lock()

    def submit(
        self,
        work: Work,
        body: dict[str, Any],
        client: WebClient,
        lane: str | None = None,
        request: BoltRequest | None = None,
    ) -> None:
        future = self._pool(lane).submit(self._once, work, body, client, request)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self, timeout_s: float) -> int:
        """Finish the work already acked, waiting at most `timeout_s`; the number of commands left undone."""
        with self._lock:
            pending = set(self._pending)
        _, undone = wait(pending, timeout=timeout_s)
        # What has not started by now never will; the threads still running hold no new work.
        with self._lanes_lock:
            pools = [self.pool, *self._lanes.values()]
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        return len(undone)

    def listener(self, work: Work, refusal: Refusal = _no_refusal, lane: Lane = _general) -> Callable[..., None]:
        """A Bolt listener that acks (or acks `refusal`'s answer and stops) and queues `work` in its lane."""

        def acked(ack: Ack, body: dict[str, Any], client: WebClient, request: BoltRequest | None = None) -> None:
            refused = refusal(body)
            if refused is not None:
                ack(**refused)
                return
            ack()
            self.submit(work, body, client, lane(body), request)

        return acked

    def _once(self, work: Work, body: dict[str, Any], client: WebClient, request: BoltRequest | None) -> None:
        # Checked here, not before the ack: the ack never waits on the database (bench/ack_latency.py).
        if request is not None and not self._first_delivery(request):
            log.warning("a %s delivered before was acked and not done again", body.get("type") or "slash command")
            return
        _logged(work, body, client)

    def waiting(self) -> int:
        """Work acked and waiting for a thread, in every pool."""
        with self._lanes_lock:
            pools = [self.pool, *self._lanes.values()]
        # The executor keeps its queue private; it is the only measure of work waiting.
        return sum(pool._work_queue.qsize() for pool in pools)

    def _pool(self, lane: str | None) -> ThreadPoolExecutor:
        if lane is None:
            return self.pool
        with self._lanes_lock:
            if lane not in self._lanes:
                # Threads start as work arrives: a lane nobody uses costs nothing.
                self._lanes[lane] = ThreadPoolExecutor(self._lane_workers, thread_name_prefix=f"slack-{lane}")
            return self._lanes[lane]


def _logged(work: Work, body: dict[str, Any], client: WebClient) -> None:
    # Work tells people what failed itself; this catches only a payload it could not even read, which a
    # future would otherwise swallow.
    try:
        work(body, client)
    except Exception:
        log.exception("work behind a Slack ack failed on a %s payload", body.get("type") or "slash command")
