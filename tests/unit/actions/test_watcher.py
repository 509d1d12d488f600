"""The watcher over a real store (sqlite and PostgreSQL): each transition once, across restarts; the polling helper."""

import time
from collections.abc import Iterator

import pytest

from actions.jobs.job import JobState, JobStatus
from actions.jobs.service import Jobs
from actions.jobs.watcher import poll_changes, watch
from actions.settings import Settings
from tests.builders.job_records import launched, open_store

PENDING, RUNNING, SUCCEEDED, FAILED = JobState.PENDING, JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED


class ScriptedBackend:
    """A backend whose observe() yields a prepared list: the real ones are tested on their own."""

    name = "local"

    def __init__(self, *statuses: JobStatus) -> None:
        self.statuses = statuses
        self.timeouts: list[float | None] = []

    def observe(self, timeout_s: float | None = None) -> Iterator[JobStatus]:
        self.timeouts.append(timeout_s)
        yield from self.statuses

    def status(self, name: str) -> JobStatus:
        return [status for status in self.statuses if status.name == name][-1]


def changes(transitions) -> list[tuple[str, JobState | None, JobState]]:
    return [(transition.job, transition.previous, transition.current) for transition in transitions]


@pytest.fixture
def store(state_store_url):
    store = open_store(state_store_url)
    launched(store, "train-a")
    launched(store, "train-b")
    yield store
    store.close()


def test_watch_yields_state_changes_only(store):
    backend = ScriptedBackend(
        JobStatus("train-a", RUNNING),
        JobStatus("train-a", RUNNING),
        JobStatus("train-a", RUNNING, dashboard_url="http://h:8265"),
        JobStatus("not-ours", RUNNING),
        JobStatus("train-a", SUCCEEDED),
    )
    assert changes(watch(backend, store, timeout_s=5)) == [
        ("train-a", PENDING, RUNNING),
        ("train-a", RUNNING, SUCCEEDED),
    ]
    assert backend.timeouts == [5]


def test_restarted_watcher_yields_what_it_missed_once(state_store_url, store):
    before_crash = watch(ScriptedBackend(JobStatus("train-a", RUNNING), JobStatus("train-b", RUNNING)), store)
    assert changes([next(before_crash)]) == [("train-a", PENDING, RUNNING)]
    before_crash.close()  # the bot dies before it sees train-b start; then, while down, train-a fails

    # observe() starts over with every job's current status, and repeats some as streams do.
    current = (JobStatus("train-a", FAILED, reason="OOM"), JobStatus("train-b", RUNNING))
    restarted = open_store(state_store_url)
    assert changes(watch(ScriptedBackend(*current, *current), restarted)) == [
        ("train-a", RUNNING, FAILED),
        ("train-b", PENDING, RUNNING),
    ]
    assert list(watch(ScriptedBackend(*current), open_store(state_store_url))) == []
    assert [event.state for event in store.history("train-a")] == [PENDING, RUNNING, FAILED]


def snapshots(*polls: list[JobStatus]):
    """list_statuses() for poll_changes: each call the next poll, the last one repeated."""
    calls = []

    def list_statuses() -> list[JobStatus]:
        calls.append(None)
        return polls[min(len(calls), len(polls)) - 1]

    return list_statuses, calls


def test_poll_changes_yields_every_status_then_only_changes():
    a_pending, b_running = JobStatus("a", PENDING), JobStatus("b", RUNNING)
    a_running, a_with_url = JobStatus("a", RUNNING), JobStatus("a", RUNNING, dashboard_url="http://h:8265")
    list_statuses, calls = snapshots(
        [a_pending, b_running],
        [a_pending, b_running],
        [a_running, b_running],
        [a_with_url, b_running],
        [a_with_url],
        [a_with_url, b_running],
    )
    seen = list(poll_changes(list_statuses, interval_s=0.001, timeout_s=0.3))
    assert len(calls) > 6
    # b is listed again after it was gone for one poll, so it is new again.
    assert seen == [a_pending, b_running, a_running, a_with_url, b_running]


def test_poll_changes_returns_after_its_timeout_and_zero_is_one_poll():
    list_statuses, calls = snapshots([JobStatus("a", RUNNING)])
    assert list(poll_changes(list_statuses, interval_s=10, timeout_s=0)) == [JobStatus("a", RUNNING)]
    assert len(calls) == 1

    started = time.monotonic()
    assert list(poll_changes(list_statuses, interval_s=10, timeout_s=0.2)) == [JobStatus("a", RUNNING)]
    assert 0.2 <= time.monotonic() - started < 2


def test_the_jobs_service_observes_every_status_with_the_change_it_recorded(store, tmp_path):
    seen = (JobStatus("train-a", RUNNING), JobStatus("train-a", RUNNING), JobStatus("train-b", FAILED))
    jobs = Jobs(Settings(data_dir=tmp_path), store, backends={"local": ScriptedBackend(*seen)})
    observed = list(jobs.observe(timeout_s=5))
    assert [status for status, _ in observed] == list(seen)
    assert [change and (change.job, change.previous, change.current) for _, change in observed] == [
        ("train-a", PENDING, RUNNING),
        None,
        ("train-b", PENDING, FAILED),
    ]
    found = jobs.status_history("train-b")
    assert (found.status.state, [event.state for event in found.history]) == (FAILED, [PENDING, FAILED])
