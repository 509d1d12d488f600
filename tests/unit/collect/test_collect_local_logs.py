"""Which parts of a local Ray session's logs belong to a job: raylet.out entries and log tails."""

from __future__ import annotations

from pathlib import Path

from diagnosers.collect.local_logs import keep_tail, raylet_entries_of_job, read_tail

# Ray 2.60's raylet.out wording, trimmed: job 02000000's task is killed while job 03000000's worker was
# considered and spared; then job 03000000 starts a worker.
RAYLET = """\
[2026-11-22 18:47:04,340 I 24643 24643] (raylet) threshold_memory_monitor.cc:53: ThresholdMemoryMonitor initialized
[state-dump] NodeManager:
[state-dump] InitialConfigResources: {CPU: 4, memory: 1.72667e+10}
[2026-11-22 18:47:09,080 I 24643 24643] (raylet) worker_pool.cc:811: Job 02000000 already started in worker pool.
[2026-11-22 18:47:31,216 I 24643 24643] (raylet) node_manager.cc:3199: Killing 1 worker(s), kill details: \
Memory on the node (IP: 192.0.2.2, ID: 36c1) was 9.48GB used / 23.54GB limit (0.402640)
OOM kill reason: Memory usage 10143776768B exceeded threshold of 10110604288B (40.0% of 25276510208B limit)
Ray killed 1 worker(s) based on the killing policy
Considered workers: [
Selected to kill: (Task: job ID=02000000, lease ID=00, task name=hog, pid=24744, actual memory used=8.15GB)
(Task: job ID=03000000, lease ID=01, task name=square, pid=24801, actual memory used=0.07GB)
]
[2026-11-22 18:47:40,001 I 24643 24643] (raylet) runtime_env_agent_client.cc:395: Create runtime env for job 03000000
[2026-11-22 18:47:40,002 I 24643 24643] (raylet) worker_pool.cc:811: Job 030000001 already started in worker pool.
"""
MAX = 1 << 20


def _raylet(tmp_path: Path) -> Path:
    path = tmp_path / "raylet.out"
    path.write_text(RAYLET)
    return path


def test_the_killed_jobs_entries_keep_the_whole_kill_report(tmp_path: Path) -> None:
    kept = raylet_entries_of_job(_raylet(tmp_path), "02000000", MAX).decode()
    assert kept.startswith("[2026-11-22 18:47:09,080")
    assert "Killing 1 worker(s)" in kept
    assert "OOM kill reason: Memory usage 10143776768B exceeded threshold" in kept
    assert kept.endswith("]\n")
    assert "state-dump" not in kept
    assert "runtime env" not in kept


def test_a_job_only_considered_for_the_kill_gets_none_of_it(tmp_path: Path) -> None:
    kept = raylet_entries_of_job(_raylet(tmp_path), "03000000", MAX).decode()
    assert "Killing" not in kept
    assert "Memory usage" not in kept
    # Its own line, but not a longer id that starts with the same digits.
    assert kept.splitlines() == [
        "[2026-11-22 18:47:40,001 I 24643 24643] (raylet) runtime_env_agent_client.cc:395: "
        "Create runtime env for job 03000000"
    ]


def test_a_job_the_raylet_never_named_gets_nothing(tmp_path: Path) -> None:
    assert raylet_entries_of_job(_raylet(tmp_path), "05000000", MAX) == b""
    assert raylet_entries_of_job(tmp_path / "absent.out", "02000000", MAX) == b""


def test_tails_start_at_a_line_when_one_is_inside() -> None:
    data = b"first line\nsecond line\nthird\n"
    assert keep_tail(data, len(data)) == data
    assert keep_tail(data, 8) == b"third\n"
    assert keep_tail(data, len(b"third\n")) == b"third\n"
    # One line longer than the limit: its end is all there is.
    assert keep_tail(b"x" * 100, 10) == b"x" * 10


def test_read_tail_reads_only_the_end(tmp_path: Path) -> None:
    path = tmp_path / "driver.log"
    path.write_bytes(b"old\n" * 1000 + b"Traceback (most recent call last):\nRuntimeError: boom\n")
    assert read_tail(path, 56) == b"Traceback (most recent call last):\nRuntimeError: boom\n"
    assert read_tail(tmp_path / "gone.log", 60) == b""


def test_a_long_raylet_log_keeps_only_the_jobs_last_entries(tmp_path: Path) -> None:
    path = tmp_path / "raylet.out"
    lines = [
        f"[2026-11-22 18:47:{n % 60:02d},000 I 1 1] (raylet) worker_pool.cc:811: Job 02000000 seq {n}\n"
        for n in range(5000)
    ]
    path.write_text("".join(line + RAYLET.splitlines(keepends=True)[0] for line in lines))
    kept = raylet_entries_of_job(path, "02000000", 1000)
    assert kept == keep_tail("".join(lines).encode(), 1000)
    assert kept.endswith(b"seq 4999\n")
