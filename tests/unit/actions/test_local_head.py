"""The local head belongs to its data directory: found by its record and session, stopped alone."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from actions.errors import Unavailable
from actions.jobs.backends.local_head import (
    HEAD_HOST,
    MAX_TEMP_DIR_CHARS,
    ensure_head,
    find_head,
    record_path,
    stop_head,
    temp_dir,
)
from actions.settings import Settings
from tests.servers.processes import free_port

# Sleeps as a head process would run: the head's folder in its arguments, one child of its own.
HEAD_LIKE = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
)


def fake_head(folder: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HEAD_LIKE, f"--temp-dir={folder}"])


def children(process: subprocess.Popen) -> list[int]:
    deadline = time.monotonic() + 10
    while not (found := psutil.Process(process.pid).children()):
        assert time.monotonic() < deadline, "the fake head started no child"
        time.sleep(0.05)
    return [child.pid for child in found]


def test_stop_head_stops_its_processes_and_their_children_only(tmp_path):
    ours = Settings(data_dir=tmp_path / "data")
    mine = fake_head(str(temp_dir(ours)))
    # Another head whose folder starts with the same characters, and one with a folder of its own.
    neighbours = [fake_head(f"{temp_dir(ours)}2"), fake_head(str(tmp_path / "other" / "ray"))]
    try:
        my_child = children(mine)
        their_children = [pid for each in neighbours for pid in children(each)]
        stop_head(ours)
        assert mine.wait(10) is not None
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in my_child)
        assert all(each.poll() is None for each in neighbours)
        assert all(psutil.pid_exists(pid) for pid in their_children)
    finally:
        for each in neighbours:
            for child in psutil.Process(each.pid).children():
                child.kill()
            each.kill()
            each.wait()


@pytest.fixture
def short_data_dir() -> Iterator[Path]:
    """A data directory short enough that the head's temp dir is inside it (tmp_path is too long for Ray)."""
    with tempfile.TemporaryDirectory(prefix="tb-", dir="/tmp") as folder:
        yield Path(folder)


def test_stop_head_stops_a_process_that_only_writes_into_its_folder(short_data_dir, tmp_path):
    """Ray's client server names neither the temp dir nor the session in its arguments: only its logs are there."""
    ours = Settings(data_dir=short_data_dir)
    logs = temp_dir(ours) / "session_1" / "logs"
    logs.mkdir(parents=True)
    elsewhere = tmp_path / "other" / "logs"
    elsewhere.mkdir(parents=True)
    sleep = [sys.executable, "-c", "import time; time.sleep(60)", "-m", "ray.util.client.server"]
    with (
        (logs / "ray_client_server.out").open("w") as mine_log,
        (elsewhere / "ray_client_server.out").open("w") as theirs_log,
    ):
        mine = subprocess.Popen(sleep, stdout=mine_log)
        theirs = subprocess.Popen(sleep, stdout=theirs_log)
    try:
        assert stop_head(ours) == 1
        assert mine.wait(10) is not None
        assert theirs.poll() is None
    finally:
        for each in (mine, theirs):
            each.kill()
            each.wait()


def test_stop_head_forgets_the_record(tmp_path):
    ours = Settings(data_dir=tmp_path / "data")
    record_path(ours).parent.mkdir(parents=True)
    record_path(ours).write_text("{}")
    assert stop_head(ours) == 0
    assert not record_path(ours).exists()


class _Dashboard(BaseHTTPRequestHandler):
    """Answers /api/version as a Ray dashboard of the session in the server's `session` attribute."""

    def do_GET(self) -> None:
        body = json.dumps({"version": "4", "ray_version": "2.60.0", "session_name": self.server.session}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[ThreadingHTTPServer]:
    """A dashboard on a free loopback port that reports session_a until a test changes `session`."""
    server = ThreadingHTTPServer((HEAD_HOST, 0), _Dashboard)
    server.session = "session_a"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def recorded(settings: Settings, port: int, session: str) -> None:
    record = {"dashboard_port": port, "gcs_port": 1, "client_port": 2, "session_name": session, "temp_dir": "/x"}
    record_path(settings).parent.mkdir(parents=True, exist_ok=True)
    record_path(settings).write_text(json.dumps(record))


def test_the_recorded_head_is_used_only_while_it_reports_the_recorded_session(tmp_path, dashboard):
    settings = Settings(data_dir=tmp_path)
    port = dashboard.server_address[1]
    assert find_head(settings) is None  # a dashboard answers, but this data directory recorded none
    recorded(settings, port, "session_a")
    assert find_head(settings) == f"http://{HEAD_HOST}:{port}"
    dashboard.session = "session_b"  # the head died and another took its port
    assert find_head(settings) is None


def test_a_dashboard_set_explicitly_wins_over_the_record(tmp_path, dashboard):
    port = dashboard.server_address[1]
    explicit = Settings(data_dir=tmp_path, local_dashboard_port=port)
    recorded(explicit, free_port(), "session_a")
    assert find_head(explicit) == f"http://{HEAD_HOST}:{port}"
    by_url = Settings(data_dir=tmp_path, ray_dashboard_url=f"http://{HEAD_HOST}:{port}/")
    assert find_head(by_url) == f"http://{HEAD_HOST}:{port}"


def test_a_data_dir_too_deep_for_rays_sockets_gets_a_short_temp_dir_of_its_own(tmp_path):
    deep = [Settings(data_dir=tmp_path / ("d" * 60) / name) for name in ("one", "two")]
    folders = [temp_dir(each) for each in deep]
    assert all(len(str(folder)) <= MAX_TEMP_DIR_CHARS for folder in folders)
    assert folders[0] != folders[1]
    assert temp_dir(deep[0]) == folders[0]  # the same each time: stop finds what start made
    short = Settings(data_dir=Path("/tmp/tb-short"))  # nothing is made there
    assert temp_dir(short) == Path("/tmp/tb-short/ray")


def test_a_recorded_head_that_stays_silent_is_reported_not_replaced(tmp_path):
    """A busy head may be slow to answer: starting another would stop it and its jobs."""
    settings = Settings(data_dir=tmp_path)
    with socket.socket() as silent:
        silent.bind((HEAD_HOST, 0))
        silent.listen()  # connections wait in the backlog, never answered
        recorded(settings, silent.getsockname()[1], "session_a")
        started = time.monotonic()
        with pytest.raises(Unavailable, match="did not answer within 2 s; try again, or `trainbot stop` it"):
            ensure_head(settings)
        assert time.monotonic() - started < 10
    assert record_path(settings).exists()
    assert find_head(settings) is None


def test_stop_head_stops_the_head_in_the_temp_dir_it_recorded(tmp_path):
    """Where a short temp dir was used, TMPDIR may have changed since the start: the record says where it is."""
    ours = Settings(data_dir=tmp_path / "data")
    started_in = tmp_path / "then"
    record = {"dashboard_port": 1, "gcs_port": 2, "client_port": 3, "session_name": "s", "temp_dir": str(started_in)}
    record_path(ours).parent.mkdir(parents=True)
    record_path(ours).write_text(json.dumps(record))
    head = fake_head(str(started_in))
    try:
        children(head)
        assert stop_head(ours) == 2
        assert head.wait(10) is not None
    finally:
        head.kill()
        head.wait()


def test_a_job_is_told_its_own_heads_address_so_rays_actors_never_look_for_one(tmp_path):
    """Ray Train's own actors (its placement-group cleaner) look for "the" local cluster unless RAY_ADDRESS is
    set, and beside another checkout's head they find two and fail."""
    from actions.jobs.backends.local import LocalBackend  # noqa: PLC0415
    from actions.jobs.planning import plan_job  # noqa: PLC0415
    from actions.jobs.requests import LaunchRequest  # noqa: PLC0415

    settings = Settings(data_dir=tmp_path)
    launch = plan_job(settings, LaunchRequest(template="tiny-transformer", params=(), requester="alice"))
    assert "RAY_ADDRESS" not in LocalBackend(settings).render(launch)["runtime_env"]["env_vars"]  # no head yet
    recorded(settings, free_port(), "session_a")
    record = json.loads(record_path(settings).read_text())
    env_vars = LocalBackend(settings).render(launch)["runtime_env"]["env_vars"]
    assert env_vars["RAY_ADDRESS"] == f"{HEAD_HOST}:{record['gcs_port']}"
    explicit = Settings(data_dir=tmp_path, ray_dashboard_url="http://127.0.0.1:8265")
    assert "RAY_ADDRESS" not in LocalBackend(explicit).render(launch)["runtime_env"]["env_vars"]  # someone's own head
