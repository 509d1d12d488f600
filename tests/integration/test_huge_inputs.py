"""Huge inputs through the real CLI: a 2 GB log of one line, 10,000 tiny logs. Slow, so marked."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TRAINBOT = Path(sys.executable).with_name("trainbot")
TIMEOUT_LINE = (
    "[rank5]:[E ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600001 milliseconds before timing out."
)
CHUNK = b"x" * (64 << 20)


def diagnose_json(bundle: Path) -> tuple[dict, int]:
    """The diagnosis and the peak RSS (KiB) of that one `trainbot diagnose` process.

    os.wait4 gives this child's own rusage; RUSAGE_CHILDREN would be the largest of every child the
    test session ever waited for (a Ray head, a trainer), not this one.
    """
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [str(TRAINBOT), "diagnose", str(bundle), "--json"], stdout=subprocess.PIPE, stderr=stderr
        )
        output = process.stdout.read() if process.stdout else b""
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        assert process.returncode == 0, stderr.read().decode(errors="replace")
    return json.loads(output), usage.ru_maxrss


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
