"""The Ray dashboard and local-log collectors against the session's real Ray head, and against
dashboards that are down, refuse, hang or half-answer (small real HTTP servers on loopback)."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from actions.jobs.backends.local_head import dashboard_url, temp_dir
from actions.settings import Settings
from bot.http.server import in_thread
from diagnosers.collect.collector import Source, collect
from diagnosers.collect.local_logs import collect_local_logs
from diagnosers.collect.ray_dashboard import collect_dashboard, driver_log_name
from diagnosers.collect.target import CollectConfig, Target
from diagnosers.engine import Diagnosis, diagnose_path

pytestmark = pytest.mark.integration

JOB_TIMEOUT_S = 180
SOURCES: dict[str, Source] = {"ray": collect_dashboard, "logs": collect_local_logs}
TERMINAL = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}

# Allocates 256 MiB at a time until Ray's memory monitor kills it; stops at 85% of RAM so a head
# started without a low threshold fails the test instead of the machine.
HOG = """
import os, numpy, ray
@ray.remote(max_retries=0)
def hog():
    limit = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.85)
    chunks = [numpy.ones(256 << 20, dtype=numpy.uint8) for _ in range(limit // (256 << 20))]
    return f"allocated {len(chunks) // 4} GiB and was not killed"
print(ray.get(hog.remote()))
"""
SQUARE = """
import ray
@ray.remote
def square(x):
    print("squaring", x)
    return x * x
print(ray.get(square.remote(7)))
"""


@pytest.fixture(scope="module")
def client(ray_settings: Settings) -> JobSubmissionClient:
    return JobSubmissionClient(dashboard_url(ray_settings))


def _run_job(client: JobSubmissionClient, code: str) -> tuple[str, JobStatus]:
    submission_id = client.submit_job(entrypoint=shlex.join([sys.executable, "-c", code]))
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while (status := client.get_job_status(submission_id)) not in TERMINAL:
        assert time.monotonic() < deadline, f"job {submission_id} still {status} after {JOB_TIMEOUT_S} s"
        time.sleep(0.5)
    return submission_id, status


def _collect_local(settings: Settings, submission_id: str, status: str, folder: Path) -> Path:
    target = Target(
        job=submission_id,
        backend="local",
        status=status,
        submission_id=submission_id,
        dashboard_url=dashboard_url(settings),
        session_dir=str(temp_dir(settings) / "session_latest"),
    )
    return collect(target, CollectConfig(request_timeout_s=10, deadline_s=60), folder, SOURCES)


def _sources(bundle: Path) -> dict[str, str]:
    return json.loads((bundle / "bundle.json").read_text())["sources"]


def _finding(diagnosis: Diagnosis, finding_id: str) -> dict:
    found = [f for f in diagnosis.to_dict()["findings"] if f["id"] == finding_id]
    assert found, f"no {finding_id} finding in {[f['id'] for f in diagnosis.findings]}"
    return found[0]


def test_failed_job_bundle_quotes_the_traceback(ray_settings: Settings, client, tmp_path: Path) -> None:
    submission_id, status = _run_job(client, 'raise RuntimeError("boom from the entrypoint")')
    assert status == JobStatus.FAILED

    bundle = _collect_local(ray_settings, submission_id, status.value, tmp_path / "bundle")

    assert _sources(bundle) == {"ray": "ok", "logs": "ok"}
    jobs = json.loads((bundle / "ray" / "jobs.json").read_text())
    assert [job["submission_id"] for job in jobs] == [submission_id]
    assert "RuntimeError: boom from the entrypoint" in (bundle / driver_log_name(submission_id)).read_text()
    diagnosis = diagnose_path(bundle)
    assert diagnosis.verdict == "failed"
    quoted = [quote["text"] for found in diagnosis.to_dict()["findings"] for quote in found["evidence"]]
    assert any("boom from the entrypoint" in text for text in quoted), quoted


def test_memory_monitor_kill_gives_host_oom(ray_settings: Settings, client, tmp_path: Path) -> None:
    threshold = os.environ.get("RAY_memory_usage_threshold")  # noqa: SIM112 - Ray reads this exact case
    if not threshold or float(threshold) > 0.6:
        pytest.skip(
            "needs the session's Ray head started with RAY_memory_usage_threshold <= 0.6 "
            "(run pytest with RAY_memory_usage_threshold=0.4 in its environment)"
        )
    submission_id, status = _run_job(client, HOG)
    assert status == JobStatus.FAILED

    bundle = _collect_local(ray_settings, submission_id, status.value, tmp_path / "bundle")

    assert _sources(bundle) == {"ray": "ok", "logs": "ok"}
    # Ray may kill other workers in the same pass (another job's idle actor); the report is kept whole.
    assert re.search(r"Killing \d+ worker\(s\)", (bundle / "logs" / "raylet.out").read_text())
    worker_logs = [path.name for path in (bundle / "logs").glob("worker-*")]
    assert worker_logs, "the killed task's worker logs were not matched to the job"
    host_oom = _finding(diagnose_path(bundle), "host-oom")
    assert host_oom["severity"] == "critical"
    assert any(quote["source"].startswith("logs/") for quote in host_oom["evidence"]), host_oom["evidence"]

    # raylet.out is the node's: the next job on the same head must not inherit this kill.
    next_id, next_status = _run_job(client, SQUARE)
    next_bundle = _collect_local(ray_settings, next_id, next_status.value, tmp_path / "next")
    assert "Killing" not in (next_bundle / "logs" / "raylet.out").read_text()
    assert "host-oom" not in [found.id for found in diagnose_path(next_bundle).findings]


def test_successful_job_collects_every_source(ray_settings: Settings, client, tmp_path: Path) -> None:
    submission_id, status = _run_job(client, SQUARE)
    assert status == JobStatus.SUCCEEDED

    bundle = _collect_local(ray_settings, submission_id, status.value, tmp_path / "bundle")

    assert _sources(bundle) == {"ray": "ok", "logs": "ok"}
    tasks = json.loads((bundle / "ray" / "tasks.json").read_text())["data"]["result"]["result"]
    assert [task["name"] for task in tasks] == ["square"]
    assert json.loads((bundle / "ray" / "nodes.json").read_text())["result"] is True
    assert "\n49\n" in (bundle / driver_log_name(submission_id)).read_text()
    worker_out = "".join(path.read_text() for path in (bundle / "logs").glob("worker-*.out"))
    assert "squaring 7" in worker_out
    assert diagnose_path(bundle).verdict != "failed"


def test_job_unknown_to_the_dashboard(ray_settings: Settings, tmp_path: Path) -> None:
    bundle = _collect_local(ray_settings, "raysubmit_nosuchjob", "FAILED", tmp_path / "bundle")

    sources = _sources(bundle)
    assert sources["ray"] == "error: no job raysubmit_nosuchjob on the dashboard"
    assert sources["logs"].startswith("error: no job-driver-raysubmit_nosuchjob.log in ")
    assert not (bundle / "ray" / "jobs.json").exists(), "other jobs' entries are not this job's evidence"
    assert (bundle / "ray" / "nodes.json").is_file()
    assert not (bundle / driver_log_name("raysubmit_nosuchjob")).exists()


# Dashboards that are down, refuse, hang or half-answer.


def _dashboard_target(url: str) -> Target:
    return Target(job="train-1", backend="kuberay", submission_id="raysubmit_abc", dashboard_url=url)


def _collect_dashboard(url: str, folder: Path, **config: object) -> Path:
    return collect(_dashboard_target(url), CollectConfig(**config), folder, {"ray": collect_dashboard})


class _StubDashboard(BaseHTTPRequestHandler):
    """A dashboard that knows job raysubmit_abc and answers each path with ROUTES' (status, body)."""

    ROUTES: ClassVar[dict[str, tuple[int, object]]] = {}
    TOKEN: ClassVar[str] = ""

    def do_GET(self) -> None:
        if self.TOKEN and self.headers.get("Authorization") != f"Bearer {self.TOKEN}":
            self._reply(401, "Unauthorized: Missing authentication token")
            return
        status, body = self.ROUTES.get(self.path.split("?", 1)[0], (404, "not found"))
        self._reply(status, body)

    def _reply(self, status: int, body: object) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


JOBS = [{"submission_id": "raysubmit_abc", "job_id": "05000000", "status": "FAILED", "message": "exit 1"}]
HEALTHY = {
    "/api/jobs/": (200, JOBS),
    "/nodes": (200, {"result": True, "data": {"summary": []}}),
    "/api/v0/tasks": (200, {"result": True, "data": {"result": {"result": []}}}),
    "/api/jobs/raysubmit_abc/logs": (200, {"logs": "line 1\nTraceback (most recent call last):\nValueError: x\n"}),
}


@pytest.fixture
def stub(request: pytest.FixtureRequest) -> Iterator[str]:
    routes, token = request.param
    handler = type("Handler", (_StubDashboard,), {"ROUTES": routes, "TOKEN": token})
    with in_thread(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as url:
        yield url


def test_closed_port_is_dashboard_unreachable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    bundle = _collect_dashboard(url, tmp_path / "bundle")

    status = _sources(bundle)["ray"]
    assert status.startswith(f"unreachable: {url}: ")
    assert "Connection refused" in status
    finding = _finding(diagnose_path(bundle), "dashboard-unreachable")
    assert finding["evidence"] == [{"source": "bundle.json", "line": 1, "text": f'"ray": "{status}"'}]


@pytest.mark.parametrize("stub", [(HEALTHY, "s3cret")], indirect=True)
def test_refused_without_token_names_the_setting(stub: str, tmp_path: Path) -> None:
    bundle = _collect_dashboard(stub, tmp_path / "bundle")

    assert _sources(bundle)["ray"] == (
        "error: the Ray dashboard refused the request (HTTP 401): set TRAINBOT_RAY_DASHBOARD_TOKEN"
    )
    assert not (bundle / "ray").exists()
    _finding(diagnose_path(bundle), "dashboard-unreachable")


@pytest.mark.parametrize("stub", [(HEALTHY, "s3cret")], indirect=True)
def test_token_is_sent_as_bearer(stub: str, tmp_path: Path) -> None:
    bundle = _collect_dashboard(stub, tmp_path / "bundle", dashboard_token="s3cret")

    assert _sources(bundle)["ray"] == "ok"
    assert json.loads((bundle / "ray" / "jobs.json").read_text()) == JOBS[:1]
    assert (bundle / driver_log_name("raysubmit_abc")).read_text().endswith("ValueError: x\n")


@pytest.mark.parametrize("stub", [({**HEALTHY, "/api/v0/tasks": (500, "state API down")}, "")], indirect=True)
def test_partial_failure_keeps_what_answered(stub: str, tmp_path: Path) -> None:
    bundle = _collect_dashboard(stub, tmp_path / "bundle")

    assert _sources(bundle)["ray"] == "error: GET /api/v0/tasks: HTTP 500 state API down"
    assert {path.name for path in (bundle / "ray").iterdir()} == {"jobs.json", "nodes.json"}
    assert (bundle / driver_log_name("raysubmit_abc")).is_file()


@pytest.mark.parametrize("stub", [(HEALTHY, "")], indirect=True)
def test_driver_log_keeps_its_last_bytes(stub: str, tmp_path: Path) -> None:
    bundle = _collect_dashboard(stub, tmp_path / "bundle", log_max_bytes=30)

    assert (bundle / driver_log_name("raysubmit_abc")).read_text() == "ValueError: x\n"


def test_hanging_dashboard_returns_within_the_request_timeout(tmp_path: Path) -> None:
    # Accepts connections (the kernel's backlog does) and never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()

        bundle = _collect_dashboard(url, tmp_path / "bundle", request_timeout_s=1.0, deadline_s=30)

        elapsed = time.monotonic() - started
    assert elapsed < 3
    assert _sources(bundle)["ray"] == f"unreachable: {url}: no answer within the request timeout"


def test_unconfigured_and_missing_sources(tmp_path: Path) -> None:
    missing = tmp_path / "ray" / "session_latest"
    targets = {
        "unconfigured": Target(job="j", backend="local", submission_id="raysubmit_abc"),
        "missing": Target(job="j", backend="local", submission_id="raysubmit_abc", session_dir=str(missing)),
    }
    unconfigured = collect(targets["unconfigured"], CollectConfig(), tmp_path / "a", SOURCES)
    absent = collect(targets["missing"], CollectConfig(), tmp_path / "b", {"logs": collect_local_logs})

    assert _sources(unconfigured) == {"ray": "not-configured", "logs": "not-configured"}
    assert _sources(absent) == {"logs": f"error: no Ray session logs at {missing / 'logs'}"}
