"""The bot's watcher: a daemon thread that follows trainbot's jobs on the configured backend and tells each
change in the job's Slack thread (bot/slack/job_threads.py).

It watches only while some job is unfinished, so an idle bot never loads Ray; a backend that cannot be
reached is tried again after a pause, and nothing it raises stops the thread.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from actions.errors import ActionError

if TYPE_CHECKING:
    from actions.jobs.service import Jobs
    from bot.slack.job_threads import JobThreads

log = logging.getLogger(__name__)

# Each observation window ends with the sweeps' progress edits: "no more than every few seconds".
WINDOW_S = 5.0
IDLE_S = 5.0
RETRY_S = 15.0


def watch_once(jobs: Jobs, threads: JobThreads, window_s: float = WINDOW_S) -> bool:
    """One window of the backend's changes, then the sweeps' progress; False when no job is unfinished."""
    threads.catch_up()
    if not jobs.list(active=True, limit=1):
        return False
    for status, _change in jobs.observe(timeout_s=window_s):
        threads.observed(status)
    threads.sweeps_progressed()
    return True


def start_job_watcher(jobs: Jobs, threads: JobThreads) -> threading.Event:
    """Start the watcher thread; set the returned event to stop it."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                busy = watch_once(jobs, threads)
            except ActionError as error:
                log.warning("watching jobs: %s; trying again in %s s", error, RETRY_S)
                stop.wait(RETRY_S)
            except Exception:
                log.exception("watching jobs failed; trying again in %s s", RETRY_S)
                stop.wait(RETRY_S)
            else:
                if not busy:
                    stop.wait(IDLE_S)

    threading.Thread(target=loop, name="job-watcher", daemon=True).start()
    return stop
