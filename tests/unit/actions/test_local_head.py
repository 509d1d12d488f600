"""Stopping the local head stops its own processes and nobody else's."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from actions.jobs.backends.local_head import stop_head, temp_dir
from actions.settings import Settings

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
