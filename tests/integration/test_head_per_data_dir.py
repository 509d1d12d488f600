"""Two data directories on one machine, each with its own real Ray head: a job goes to its own data directory's
head, a stale record never leads to another's, and `trainbot stop` stops one head whole and nothing else."""

from __future__ import annotations

import json
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import psutil
import pytest
from ray.job_submission import JobSubmissionClient

from actions.jobs.backends.local_head import STOP_TIMEOUT_S, HeadRecord, read_record, record_path, stop_head, temp_dir
from actions.settings import Settings
from tests.integration.cli import launch, trainbot, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def other_data_dir() -> Iterator[Settings]:
    """A second data directory (short enough for Ray's sockets); whatever head it starts is stopped after."""
    with tempfile.TemporaryDirectory(prefix="tb-b-", dir="/tmp") as folder:
        settings = Settings(data_dir=Path(folder))
        try:
            yield settings
        finally:
            stop_head(settings)


def session_at(url: str) -> str:
    with urllib.request.urlopen(f"{url}/api/version", timeout=5) as response:
        return json.loads(response.read())["session_name"]


def processes_of(record: HeadRecord) -> set[psutil.Process]:
    """Every process of a head, found the way a person would: its temp dir in the arguments, their children, and
    Ray's client server by the port it was given."""
    found: set[psutil.Process] = set()
    for each in psutil.process_iter(["cmdline"]):
        args = each.info["cmdline"] or []
        if any(record.temp_dir in arg for arg in args) or f"--port={record.client_port}" in args:
            found |= {each, *each.children(recursive=True)}
    return found


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_job_from_another_data_dir_runs_in_its_own_head_and_stop_ends_that_head_only(
    ray_settings, ray_env, other_data_dir
):
    first = read_record(ray_settings)
    assert first is not None
    first_processes = processes_of(first)
    # A record left by a head that died, whose dashboard port the first head holds now.
    record_path(other_data_dir).parent.mkdir(parents=True)
    record_path(other_data_dir).write_text(
        json.dumps({**asdict(first), "session_name": "session_gone", "temp_dir": str(temp_dir(other_data_dir))})
    )
    env = {
        "TRAINBOT_DATA_DIR": str(other_data_dir.data_dir),
        "TRAINBOT_LOCAL_NUM_CPUS": "2",
        "RAY_USAGE_STATS_ENABLED": "0",
    }

    job = launch(env, "launch", "tiny-transformer", "epochs=1", "steps_per_epoch=2", "--workers", "1")

    second = read_record(other_data_dir)
    assert second is not None and second.dashboard_port != first.dashboard_port
    assert session_at(second.dashboard_url) == second.session_name != first.session_name
    assert job in [each.submission_id for each in JobSubmissionClient(second.dashboard_url).list_jobs()]
    assert job not in [each.submission_id for each in JobSubmissionClient(first.dashboard_url).list_jobs()]
    assert wait_for(env, job, {"SUCCEEDED", "FAILED", "STOPPED"})["state"] == "SUCCEEDED"
    status = json.loads(trainbot(env, "status", job, "-o", "json").stdout)
    assert status["dashboard_url"] == second.dashboard_url
    # Beside another head, Ray Train's own actors still find their cluster: nothing in the logs to explain.
    diagnosis = json.loads(trainbot(env, "diagnose", job, "--json").stdout)
    assert (diagnosis["verdict"], [found["id"] for found in diagnosis["findings"]]) == (
        "compute-bound",
        ["compute-bound"],
    ), diagnosis["findings"]

    second_processes = processes_of(second)
    assert any("ray.util.client.server" in " ".join(each.cmdline()) for each in second_processes)
    started = time.monotonic()
    stopped = trainbot(env, "stop")
    # Stopped together, Ray's processes wait for the GCS server that went first until they are killed.
    assert time.monotonic() - started < STOP_TIMEOUT_S
    assert stopped.stdout.startswith(f"stopped the local Ray head of {other_data_dir.data_dir} (")
    deadline = time.monotonic() + 10
    while any(alive(each) for each in second_processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [each.cmdline() for each in second_processes if alive(each)]
    assert not record_path(other_data_dir).exists()

    # The first head answers as itself, every one of its processes still running.
    assert session_at(first.dashboard_url) == first.session_name
    assert all(alive(each) for each in first_processes)
    again = trainbot(env, "stop")
    assert again.stdout == f"no local Ray head of {other_data_dir.data_dir} is running; nothing to stop\n"
