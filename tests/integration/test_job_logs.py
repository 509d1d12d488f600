"""`trainbot logs` on a real job of the session's Ray head: a log in colour, with a form feed and a U+2028
inside two of its lines, as a tail counts them and as a pipe or a terminal gets them."""

from __future__ import annotations

import os
import sys
import time
import uuid

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from actions.jobs.backends.local_head import dashboard_url
from actions.settings import Settings
from tests.integration.cli import trainbot
from tests.paths import TRAINBOT
from tests.terminal import run_on_terminal

pytestmark = pytest.mark.integration

LINES = 30
# What the job prints: Ray's own prefixes are in colour too ("\x1b[36m(RayTrainWorker pid=...)\x1b[0m").
PRINTER = """
import sys
for i in range(30):
    odd = {20: "\\x0cpage 2", 25: "\\u2028more"}.get(i, "")
    sys.stdout.write(f"\\x1b[32mline {i}\\x1b[0m{odd}\\n")
"""


def plain_line(i: int) -> str:
    return f"line {i}" + {20: "\x0cpage 2", 25: "\u2028more"}.get(i, "")


@pytest.fixture(scope="module")
def colour_job(ray_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The submission id of a finished job that printed LINES lines in colour."""
    script = tmp_path_factory.mktemp("colour") / "printer.py"
    script.write_text(PRINTER, encoding="utf-8")
    client = JobSubmissionClient(dashboard_url(ray_settings))
    job = client.submit_job(entrypoint=f"{sys.executable} {script}", submission_id=f"colour-{uuid.uuid4().hex[:8]}")
    deadline = time.monotonic() + 120
    while client.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
        assert time.monotonic() < deadline, f"{job} did not end within 120 s"
        time.sleep(0.5)
    assert client.get_job_status(job) == JobStatus.SUCCEEDED, client.get_job_logs(job)
    return job


def test_tail_15_prints_the_last_15_lines(ray_env, colour_job):
    """Before: 13 lines, as str.splitlines also ended a line at the form feed and at the U+2028."""
    tail = trainbot(ray_env, "logs", colour_job, "--tail", "15").stdout

    assert tail.count("\n") == 15
    assert tail == "".join(plain_line(i) + "\n" for i in range(LINES - 15, LINES))


def test_a_piped_log_has_no_colour_codes(ray_env, colour_job):
    """Before: `trainbot logs JOB | less` showed ESC[32m ... ESC[0m around every line."""
    whole = trainbot(ray_env, "logs", colour_job).stdout

    assert "\x1b" not in whole
    assert whole.endswith("".join(plain_line(i) + "\n" for i in range(LINES)))


def test_a_log_on_a_terminal_keeps_its_colours(ray_env, colour_job):
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    shown = run_on_terminal(
        [str(TRAINBOT), "logs", colour_job, "--tail", "2"], {**clean, **ray_env}, stdout=True, stderr=False
    )

    assert shown.returncode == 0, shown.stderr
    # colorama (which Ray loads) resets the terminal's colours as the process exits.
    assert shown.stdout.removesuffix("\x1b[0m") == "\x1b[32mline 28\x1b[0m\n\x1b[32mline 29\x1b[0m\n"
