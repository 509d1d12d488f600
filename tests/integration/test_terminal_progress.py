"""The real `trainbot` waiting on a real job of the session's Ray head: on a terminal, its progress on stderr
(the job's state and the time it has run, the evidence sources as each is collected); piped, or with JSON, none;
stdout the same either way."""

from __future__ import annotations

import os
import re
import sys
import time
import uuid

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from actions.jobs.backends.local_head import dashboard_url
from actions.settings import Settings
from tests.integration.cli import trainbot
from tests.paths import TRAINBOT
from tests.terminal import Ran, run_on_terminal

pytestmark = pytest.mark.integration

RUNS_S = 8


def on_terminal(ray_env: dict[str, str], *args: str) -> Ran:
    """`trainbot ARGS` with its stderr on a terminal and its stdout piped."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    ran = run_on_terminal([str(TRAINBOT), *args], {**clean, **ray_env}, stdout=False, stderr=True)
    assert ran.returncode == 0, ran.stderr
    return ran


@pytest.fixture
def running_job(ray_settings: Settings, tmp_path) -> str:
    """The submission id of a job that runs for RUNS_S seconds, once it runs."""
    script = tmp_path / "sleeper.py"
    script.write_text(f"import time\nprint('working')\ntime.sleep({RUNS_S})\nprint('done')\n", encoding="utf-8")
    client = JobSubmissionClient(dashboard_url(ray_settings))
    job = client.submit_job(entrypoint=f"{sys.executable} {script}", submission_id=f"sleeper-{uuid.uuid4().hex[:8]}")
    deadline = time.monotonic() + 60
    while client.get_job_status(job) == JobStatus.PENDING:
        assert time.monotonic() < deadline, f"{job} did not start within 60 s"
        time.sleep(0.2)
    return job


def test_status_wait_shows_the_state_and_the_time_on_a_terminal_and_nothing_piped(ray_env, running_job):
    """Before: nothing at all until the job ended."""
    waited = on_terminal(ray_env, "status", running_job, "--wait")

    assert re.search(rf"{running_job}: RUNNING\S*  \d+s", waited.stderr), waited.stderr
    assert waited.stdout.startswith(f"{running_job}: SUCCEEDED\n")
    piped = trainbot(ray_env, "status", running_job, "--wait")
    assert piped.stderr == ""
    assert piped.stdout == waited.stdout


def test_diagnose_and_collect_show_the_sources_as_each_is_collected(ray_env, running_job, tmp_path):
    trainbot(ray_env, "status", running_job, "--wait")

    diagnosed = on_terminal(ray_env, "diagnose", running_job)
    collected = on_terminal(ray_env, "collect", running_job, "-o", str(tmp_path / "bundle.tar.gz"))

    for shown in (diagnosed.stderr, collected.stderr):
        assert f"collecting {running_job}" in shown
        assert re.search(r"collecting \S+: (\w+, )*\w+ done", shown), shown
    assert diagnosed.stdout.startswith("verdict: ")
    assert collected.stdout.startswith(f"{tmp_path / 'bundle.tar.gz'}: ")


def test_diagnose_with_json_or_piped_shows_no_progress(ray_env, running_job):
    trainbot(ray_env, "status", running_job, "--wait")

    as_json = on_terminal(ray_env, "diagnose", running_job, "--json")
    piped = trainbot(ray_env, "diagnose", running_job)

    assert as_json.stderr == ""
    assert as_json.stdout.startswith("{")
    assert piped.stderr == ""
