"""The watcher: every status a backend observes is recorded, and each state change is yielded once.

A backend's observe() starts with the current status of every job it manages, so a watcher that
restarts compares those with the store and yields the changes it missed while down; a change
already recorded is never yielded again, by this watcher or by another one on the same store.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

from actions.jobs.job import Backend, JobStatus
from actions.jobs.records import Store, Transition


def recorded_statuses(
    backend: Backend, store: Store, timeout_s: float | None = None
) -> Iterator[tuple[JobStatus, Transition | None]]:
    """Each status `backend` observes, recorded first, with the state change it made (None: none)."""
    for status in backend.observe(timeout_s):
        yield status, store.record_status(status)


def watch(backend: Backend, store: Store, timeout_s: float | None = None) -> Iterator[Transition]:
    """The state changes of trainbot's jobs on `backend`, each recorded before it is yielded."""
    for _status, transition in recorded_statuses(backend, store, timeout_s):
        if transition is not None:
            yield transition


def poll_changes(
    list_statuses: Callable[[], list[JobStatus]], interval_s: float, timeout_s: float | None = None
) -> Iterator[JobStatus]:
    """observe() for a backend that can only be polled: every status now, then each one that differs.

    Polls every `interval_s` seconds and returns after `timeout_s` (None: never; 0: one poll).
    """
    deadline = math.inf if timeout_s is None else time.monotonic() + timeout_s
    last_seen: dict[str, JobStatus] = {}
    while True:
        current = list_statuses()
        for status in current:
            if last_seen.get(status.name) != status:
                yield status
        # Only jobs still listed are remembered, so a job that is gone is not held forever.
        last_seen = {status.name: status for status in current}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(interval_s, remaining))
