"""A waiting command's progress line (bot/render/progress.py) drawn by rich on a terminal console, and the
collection's progress events (actions/evidence/collecting.py) heard as each source ends. The real `trainbot` on a
pseudo-terminal and piped: tests/integration/test_terminal_progress.py."""

from __future__ import annotations

import io
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from rich.console import Console

from actions.evidence.collecting import SourcesCollected, reporting
from actions.jobs.job import JobState, JobStatus
from actions.settings import Settings
from bot.commands.jobs import jobs_service, sweep_standing
from bot.render.progress import collection_text, elapsed, progress_line
from diagnosers.collect.bundle_writer import BundleWriter
from diagnosers.collect.collector import collect
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.target import CollectConfig, Target
from tests.builders.job_records import launch, open_store
from tests.builders.sweep_runs import SWEEP, write_sweep


def terminal() -> tuple[Console, io.StringIO]:
    screen = io.StringIO()
    return Console(file=screen, force_terminal=True, width=100, color_system="standard"), screen


def test_the_line_shows_the_state_and_the_time_since_the_job_started():
    console, screen = terminal()
    with progress_line(True, "job-x: waiting", console=console) as line:
        line.show("job-x: RUNNING", since=datetime.now(UTC) - timedelta(seconds=75))
        time.sleep(0.6)  # rich redraws 4 times a second

    shown = screen.getvalue()
    assert "job-x: RUNNING" in shown
    assert "1m15s" in shown
    # The line is gone once the wait ends (erased), so what the command prints next starts a clean line.
    assert shown.endswith("\x1b[2K")


def test_nothing_is_drawn_where_progress_is_not_wanted():
    console, screen = terminal()
    with progress_line(False, "job-x: waiting", console=console) as line:
        line.show("job-x: RUNNING")
        time.sleep(0.3)

    assert not line.drawing
    assert screen.getvalue() == ""


def test_elapsed_reads_as_a_person_says_it():
    assert [elapsed(timedelta(seconds=s)) for s in (-3, 0, 42, 185, 3725)] == ["0s", "0s", "42s", "3m05s", "1h02m"]


def test_collection_text_names_what_is_done_and_what_is_awaited():
    assert (
        collection_text(SourcesCollected("job-x", (), ("ray", "logs")))
        == "collecting job-x: starting; waiting for ray, logs"
    )
    assert (
        collection_text(SourcesCollected("job-x", ("logs",), ("ray",)))
        == "collecting job-x: logs done; waiting for ray"
    )
    assert collection_text(SourcesCollected("job-x", ("logs", "ray"), ())) == "collecting job-x: logs, ray done"


def test_a_collection_reports_each_source_as_it_ends_even_one_that_fails(tmp_path):
    """The sources are run by the real collector, in its threads; the slow one is still awaited when the others
    have been reported."""
    heard: list[SourcesCollected] = []
    release = threading.Event()

    def quick(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
        writer.write_json("quick.json", {})

    def broken(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
        raise RuntimeError("the service said no")

    def slow(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
        release.wait(5)

    sources = reporting("job-x", {"quick": quick, "broken": broken, "slow": slow}, heard.append)
    ended = threading.Thread(
        target=collect, args=(Target("job-x", "local"), CollectConfig(deadline_s=10), tmp_path / "b", sources)
    )
    ended.start()
    deadline = time.monotonic() + 5
    while len(heard) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert heard[0] == SourcesCollected("job-x", (), ("quick", "broken", "slow"))
    assert sorted(heard[2].done) == ["broken", "quick"] and heard[2].waiting == ("slow",)
    release.set()
    ended.join(5)

    assert heard[-1].waiting == () and sorted(heard[-1].done) == ["broken", "quick", "slow"]
    assert len(heard) == 4


def test_without_a_listener_the_sources_are_left_as_they_are():
    sources = {"quick": lambda target, config, writer, deadline: None}

    assert reporting("job-x", sources, None) is sources


def test_a_sweeps_wait_line_counts_its_trials_and_names_the_best(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_sweep(uri, {"t1": ("FINISHED", 2.5), "t2": ("FAILED", None), "t3": ("RUNNING", 1.75)})
    settings = Settings(data_dir=tmp_path, mlflow_tracking_uri=uri)
    store = open_store(settings.state_url())
    sweep = replace(launch(SWEEP), kind="sweep", params={"trials": 10})
    store.record_launch(sweep, "local", JobStatus(SWEEP, JobState.RUNNING))
    store.record_launch(launch("tiny-transformer-x1"), "local", JobStatus("tiny-transformer-x1", JobState.RUNNING))
    jobs = jobs_service(settings)

    assert sweep_standing(settings, jobs, SWEEP) == " · 2/10 trials done, 1 running, best val_loss 1.75 (t3)"
    assert sweep_standing(settings, jobs, "tiny-transformer-x1") == ""
