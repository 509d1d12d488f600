"""The state store on real sqlite files and a real PostgreSQL database: launches, lookups, transitions, races,
cursors."""

import json
import multiprocessing
import sqlite3
import threading
from dataclasses import fields
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import StatementError

from actions.errors import BadRequest, Conflict, NotFound
from actions.jobs.job import JobState, JobStatus
from actions.jobs.records import Store
from actions.state.database import _switch_to_wal
from tests.builders.job_records import launch, launched, open_store


def observed(record: JobStatus) -> JobStatus:
    """Only the JobStatus fields of a JobRecord or an Event."""
    return JobStatus(**{field.name: getattr(record, field.name) for field in fields(JobStatus)})


@pytest.fixture
def store(state_store_url):
    store = open_store(state_store_url)
    yield store
    store.close()


def test_create_schema_again_keeps_the_data(state_store_url, store):
    launched(store, "train-a")
    store.create_schema()
    again = open_store(state_store_url)
    assert again.get("train-a").name == "train-a"


def test_the_sqlite_file_is_in_wal_mode(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_a_missing_data_directory_is_created(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'nested' / 'data' / 'state.db'}")
    store.create_schema()
    launched(store, "train-a")
    assert (tmp_path / "nested" / "data" / "state.db").is_file()


def _start_and_launch(url: str, name: str, barrier) -> None:
    store = Store(url)
    barrier.wait(timeout=60)
    store.create_schema()
    launched(store, name)


@pytest.fixture
def fresh_url(state_store_url, tmp_path):
    """A state store nobody opened yet: on sqlite in a data directory that does not exist yet."""
    if state_store_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'data' / 'state.db'}"
    return state_store_url


def test_processes_starting_at_once_all_create_the_schema_and_write(fresh_url):
    # A bot and a CLI starting on a fresh data directory at the same moment. Spawned, not forked: a fork copies
    # locks that the suite's other threads hold (tests/unit/actions/test_migrations.py saw a child wait forever).
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    processes = [context.Process(target=_start_and_launch, args=(fresh_url, f"job-{i}", barrier)) for i in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=30)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    names = {job.name for job in open_store(fresh_url).list_jobs()}
    assert names == {"job-0", "job-1", "job-2", "job-3"}


def test_threads_creating_the_schema_at_once_do_not_fail(fresh_url):
    stores = [Store(fresh_url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    errors: list[Exception] = []

    def start(store: Store) -> None:
        barrier.wait()
        try:
            store.create_schema()
        except Exception as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=start, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    launched(stores[0], "train-a")


def test_record_launch_keeps_everything_and_its_first_event(store):
    started = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    status = JobStatus(
        "train-a", JobState.RUNNING, message="started", dashboard_url="http://h:8265", start_time=started
    )
    job = store.record_launch(launch("train-a"), "kuberay", status)

    assert job == store.get("train-a")
    assert (job.backend, job.kind, job.template, job.requester) == ("kuberay", "train", "tiny-transformer", "alice")
    assert (job.params, job.workers, job.gpus_per_worker) == ({"lr": 0.001, "strategy": "fsdp"}, 2, 1)
    assert job.entrypoint == launch("train-a").entrypoint
    assert observed(job) == status
    assert job.created_at.tzinfo is not None
    assert store.known("train-a")
    [first] = store.history("train-a")
    assert observed(first) == status
    assert datetime.fromisoformat(json.loads(json.dumps(first.to_dict()))["at"]) == job.created_at == first.at
    as_json = json.loads(json.dumps(job.to_dict()))
    assert as_json["state"] == "RUNNING"
    assert datetime.fromisoformat(as_json["start_time"]) == started
    assert datetime.fromisoformat(as_json["created_at"]) == job.created_at


def test_a_taken_name_is_a_conflict_and_changes_nothing(store):
    launched(store, "train-a", requester="alice")
    with pytest.raises(Conflict, match="train-a"):
        store.record_launch(launch("train-a", "mallory"), "local", JobStatus("train-a", JobState.FAILED))
    assert store.get("train-a").requester == "alice"
    assert [event.state for event in store.history("train-a")] == [JobState.PENDING]


def test_unknown_job_says_how_to_list_jobs(store):
    assert not store.known("nope")
    for lookup in (store.get, store.find, store.history):
        with pytest.raises(NotFound, match="trainbot jobs"):
            lookup("nope")


def test_find_takes_a_unique_prefix_and_an_exact_name_wins(store):
    for name in ("train-a", "train-ab", "sweep-x"):
        launched(store, name)
    assert store.find("sw").name == "sweep-x"
    assert store.find("train-a").name == "train-a"
    assert store.find("train-ab").name == "train-ab"


def test_find_ambiguous_prefix_lists_candidates(store):
    for name in ("train-a", "train-b"):
        launched(store, name)
    with pytest.raises(BadRequest, match="train-a, train-b"):
        store.find("train")
    with pytest.raises(BadRequest, match="trainbot jobs"):
        store.find("")


@pytest.mark.parametrize("prefix", ["%", "_rain", "TRAIN"])
def test_find_prefix_is_literal_and_case_sensitive(store, prefix):
    launched(store, "train-a")
    with pytest.raises(NotFound):
        store.find(prefix)


def test_list_jobs_newest_first_with_filters(store):
    launched(store, "old", requester="alice", state=JobState.SUCCEEDED)
    launched(store, "mid", requester="bob", state=JobState.RUNNING)
    launched(store, "new", requester="alice", state=JobState.PENDING)

    assert [job.name for job in store.list_jobs()] == ["new", "mid", "old"]
    assert [job.name for job in store.list_jobs(limit=2)] == ["new", "mid"]
    assert [job.name for job in store.list_jobs(requester="alice")] == ["new", "old"]
    assert [job.name for job in store.list_jobs(active=True)] == ["new", "mid"]
    assert [job.name for job in store.list_jobs(requester="alice", active=True)] == ["new"]
    assert store.list_jobs(requester="nobody") == []


def test_a_state_change_is_one_event_and_a_repeat_is_none(store):
    launched(store, "train-a")
    running = JobStatus("train-a", JobState.RUNNING, deployment_status="Running")

    transition = store.record_status(running)
    assert transition is not None
    assert (transition.job, transition.previous, transition.current) == ("train-a", JobState.PENDING, JobState.RUNNING)
    assert transition.status == running
    job = store.get("train-a")
    assert observed(job) == running
    assert job.updated_at == transition.at
    assert json.loads(json.dumps(transition.to_dict()))["previous"] == "PENDING"

    assert store.record_status(running) is None
    assert [event.state for event in store.history("train-a")] == [JobState.PENDING, JobState.RUNNING]


def test_details_without_a_state_change_update_the_row_only(store):
    launched(store, "train-a", state=JobState.RUNNING)
    with_dashboard = JobStatus("train-a", JobState.RUNNING, dashboard_url="http://h:8265")

    assert store.record_status(with_dashboard) is None
    job = store.get("train-a")
    assert observed(job) == with_dashboard
    assert job.updated_at > job.created_at
    assert len(store.history("train-a")) == 1


def test_status_of_a_job_trainbot_did_not_launch_is_ignored(store):
    assert store.record_status(JobStatus("someone-elses", JobState.RUNNING)) is None
    assert store.list_jobs() == []


def test_reason_and_message_survive_a_retry_that_wipes_them(store):
    launched(store, "train-a", state=JobState.RUNNING)
    failed = JobStatus("train-a", JobState.FAILED, reason="DeadlineExceeded", message="ran past 3600 s")
    retrying = JobStatus("train-a", JobState.PENDING, deployment_status="Retrying")
    store.record_status(failed)

    assert store.record_status(retrying) is not None
    job = store.get("train-a")
    assert (job.state, job.deployment_status) == (JobState.PENDING, "Retrying")
    assert (job.reason, job.message) == ("DeadlineExceeded", "ran past 3600 s")
    # The history keeps what was observed, the wiped values included.
    assert [observed(event) for event in store.history("train-a")][-2:] == [failed, retrying]


def test_a_watcher_that_lost_the_race_reports_nothing(state_store_url, store):
    # Force the interleaving: after `late` has read PENDING and before it writes, `early` records.
    launched(store, "train-a")
    early, late = open_store(state_store_url), open_store(state_store_url)
    running = JobStatus("train-a", JobState.RUNNING)
    early_results = []
    updates = []

    # The engine is early's too (one per URL in a process): only the first UPDATE, late's, lets early in.
    @event.listens_for(late.engine, "before_cursor_execute")
    def early_records_first(conn, cursor, statement, *_):
        if statement.startswith("UPDATE jobs") and not updates:
            updates.append(statement)
            early_results.append(early.record_status(running))

    assert late.record_status(running) is None
    assert early_results[0] is not None
    assert [event.state for event in store.history("train-a")] == [JobState.PENDING, JobState.RUNNING]


def test_a_watcher_that_lost_the_race_to_another_state_still_records_its_own(state_store_url, store):
    launched(store, "train-a")
    early, late = open_store(state_store_url), open_store(state_store_url)
    updates = []

    # The engine is early's too (one per URL in a process): only the first UPDATE, late's, lets early in.
    @event.listens_for(late.engine, "before_cursor_execute")
    def early_records_first(conn, cursor, statement, *_):
        if statement.startswith("UPDATE jobs") and not updates:
            updates.append(statement)
            early.record_status(JobStatus("train-a", JobState.RUNNING))

    transition = late.record_status(JobStatus("train-a", JobState.SUCCEEDED))
    assert transition is not None
    assert (transition.previous, transition.current) == (JobState.RUNNING, JobState.SUCCEEDED)
    assert store.get("train-a").state == JobState.SUCCEEDED


def test_two_stores_racing_in_threads_report_each_transition_once(state_store_url, store):
    names = [f"train-{i}" for i in range(20)]
    for name in names:
        launched(store, name)
    watchers = [open_store(state_store_url), open_store(state_store_url)]
    barrier = threading.Barrier(len(watchers))
    transitions = []

    def record_all(watcher: Store) -> None:
        barrier.wait()
        for name in names:
            transitions.append(watcher.record_status(JobStatus(name, JobState.RUNNING)))

    threads = [threading.Thread(target=record_all, args=(watcher,)) for watcher in watchers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reported = sorted(transition.job for transition in transitions if transition is not None)
    assert reported == sorted(names)
    assert all(len(store.history(name)) == 2 for name in names)


def test_times_are_utc_whatever_zone_they_came_in(store):
    tokyo = timezone(timedelta(hours=9))
    started = datetime(2025, 3, 1, 21, 0, 0, 123456, tzinfo=tokyo)
    launched(store, "train-a")
    store.record_status(JobStatus("train-a", JobState.RUNNING, start_time=started))

    start_time = store.get("train-a").start_time
    assert start_time == started
    assert start_time.tzinfo == UTC
    with pytest.raises(StatementError, match="timezone-aware"):
        store.record_status(JobStatus("train-a", JobState.FAILED, end_time=datetime(2025, 3, 1, 13, 0)))


HOSTILE_REQUESTERS = [
    "Ünïcødé 用户 🚀",
    "'; DROP TABLE jobs; --",
    '<@U123|bob> "quoted" \\back\\slash\nnewline\ttab',
    "\u202eevil-rtl \u200b zero-width",
    "%_ wildcard",
    "x" * 10_000,
]


@pytest.mark.parametrize("requester", HOSTILE_REQUESTERS)
def test_hostile_requesters_and_huge_params_come_back_intact(store, requester):
    params = {f"param_{i}": value for i, value in enumerate(["ß✓" * 50, 1e-300, 2**62, True, "a'b\"c"] * 2_000)}
    store.record_launch(launch("train-a", requester, params), "local", JobStatus("train-a", JobState.PENDING))
    launched(store, "train-b", requester="other")

    job = store.get("train-a")
    assert (job.requester, job.params) == (requester, params)
    assert [job.name for job in store.list_jobs(requester=requester)] == ["train-a"]


def test_cursors_are_kept_per_key_and_overwritten(state_store_url, store):
    assert store.get_cursor("kuberay/default") is None
    store.set_cursor("kuberay/default", "1001")
    store.set_cursor("kuberay/default", "1002")
    store.set_cursor("kuberay/other", "7")
    reopened = open_store(state_store_url)
    assert reopened.get_cursor("kuberay/default") == "1002"
    assert reopened.get_cursor("kuberay/other") == "7"


def test_a_locked_switch_to_wal_is_tried_again():
    class Racing:
        """A cursor whose first two WAL switches meet another process's lock, as sqlite reports it."""

        def __init__(self) -> None:
            self.tries = 0

        def execute(self, statement: str) -> None:
            self.tries += 1
            if self.tries <= 2:
                raise sqlite3.OperationalError("database is locked")

    cursor = Racing()
    _switch_to_wal(cursor)
    assert cursor.tries == 3
