"""Huge inputs through the real CLI: a 2 GB log of one line, 10,000 tiny logs. Slow, so marked."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TRAINBOT = Path(sys.executable).with_name("trainbot")
TIMEOUT_LINE = (
    "[rank5]:[E ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out."
)
CHUNK = b"x" * (64 << 20)


# Runs the command and prints its peak RSS (KiB) last on stderr. Linux carries the RSS high-water mark
# of a forked process across exec, so measured straight from this large test process the number
# would start at the test session's own size; from this small wrapper it starts near nothing.
PEAK_RSS = (
    "import os, subprocess, sys; child = subprocess.Popen(sys.argv[1:]); _, status, usage = os.wait4(child.pid, 0); "
    "print(usage.ru_maxrss, file=sys.stderr); sys.exit(os.waitstatus_to_exitcode(status))"
)


def diagnose_json(bundle: Path) -> tuple[dict, int]:
    """The diagnosis and the peak RSS (KiB) of the `trainbot diagnose` process that made it."""
    result = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(TRAINBOT), "diagnose", str(bundle), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), int(result.stderr.splitlines()[-1])


def test_a_two_gigabyte_log_of_one_line_streams_and_the_rest_is_diagnosed(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    with (logs / "one-line.log").open("wb") as out:
        for _ in range(32):
            out.write(CHUNK)
        out.write(b" NCCL WARN NET/Socket : Connection closed by remote peer 10.0.0.9<4000> ")
    (logs / "rank-5.log").write_text(TIMEOUT_LINE + "\n")
    diagnosis, peak_rss_kib = diagnose_json(tmp_path)
    ids = {found["id"] for found in diagnosis["findings"]}
    assert {"nccl-timeout", "nccl-network-error"} <= ids
    assert "longer than the scanner's window" in diagnosis["sources"]["logs/one-line.log"]
    assert peak_rss_kib < 300 * 1024


def test_ten_thousand_tiny_logs(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for index in range(10_000):
        (logs / f"pod-{index:05}.log").write_text(f"step {index} loss 0.1\n")
    (logs / "pod-07777.log").write_text(TIMEOUT_LINE + "\n")
    diagnosis, _ = diagnose_json(tmp_path)
    assert diagnosis["findings"][0]["id"] == "nccl-timeout"
    assert diagnosis["findings"][0]["evidence"][0] == {"source": "logs/pod-07777.log", "line": 1, "text": TIMEOUT_LINE}
