"""Huge inputs through the real CLI: a 2 GB log of one line, 10,000 tiny logs. Slow, so marked."""

import json
import resource
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


def diagnose_json(bundle: Path) -> dict:
    result = subprocess.run(
        [str(TRAINBOT), "diagnose", str(bundle), "--json"], capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_two_gigabyte_log_of_one_line_streams_and_the_rest_is_diagnosed(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    with (logs / "one-line.log").open("wb") as out:
        for _ in range(32):
            out.write(CHUNK)
        out.write(b" NCCL WARN NET/Socket : Connection closed by remote peer 10.0.0.9<4000> ")
    (logs / "rank-5.log").write_text(TIMEOUT_LINE + "\n")
    diagnosis = diagnose_json(tmp_path)
    ids = {found["id"] for found in diagnosis["findings"]}
    assert {"nccl-timeout", "nccl-network-error"} <= ids
    assert "longer than the scanner's window" in diagnosis["sources"]["logs/one-line.log"]
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 300 * 1024


def test_ten_thousand_tiny_logs(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for index in range(10_000):
        (logs / f"pod-{index:05}.log").write_text(f"step {index} loss 0.1\n")
    (logs / "pod-07777.log").write_text(TIMEOUT_LINE + "\n")
    diagnosis = diagnose_json(tmp_path)
    assert diagnosis["findings"][0]["id"] == "nccl-timeout"
    assert diagnosis["findings"][0]["evidence"][0] == {"source": "logs/pod-07777.log", "line": 1, "text": TIMEOUT_LINE}
