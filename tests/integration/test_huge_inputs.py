"""Huge and hostile inputs through the real CLI: a 2 GB log of one line, 10,000 tiny logs, decompression
bombs, a 250 MB JSON array, a 5 GiB binary log. Slow, so marked."""

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.paths import TRAINBOT

pytestmark = pytest.mark.integration

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


def diagnose_json(bundle: Path, env: dict[str, str] | None = None) -> tuple[dict, int]:
    """The diagnosis and the peak RSS (KiB) of the `trainbot diagnose` process that made it."""
    result = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(TRAINBOT), "diagnose", str(bundle), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), int(result.stderr.splitlines()[-1])


# What issue 13 asks of every hostile bundle.
HOSTILE_SECONDS = 60
HOSTILE_RSS_KIB = 500 * 1024


def diagnose_hostile(bundle: Path, env: dict[str, str] | None = None) -> dict:
    began = time.monotonic()
    diagnosis, peak_rss_kib = diagnose_json(bundle, env)
    assert time.monotonic() - began < HOSTILE_SECONDS
    assert peak_rss_kib < HOSTILE_RSS_KIB
    return diagnosis


COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lambda data: lzma.compress(data, preset=1),
}
BOMB_CHUNK = 32 << 20


def write_bomb(path: Path, compression: str, name: str, line: bytes, total: int) -> None:
    """A tar of rank-1's timeout log, then `name`: `line` repeated to `total` bytes. The archive is a row of
    compressed streams (every reader takes them as one), and the stream of one chunk is written again and
    again, so a bomb of gigabytes takes a fraction of a second and a few MB to make."""
    compress = COMPRESS[compression]
    chunk = line * (BOMB_CHUNK // len(line))
    packed = compress(chunk)
    with path.open("wb") as out:
        for member, size in (("logs/rank-5.log", len(TIMEOUT_LINE) + 1), (name, total // len(chunk) * len(chunk))):
            info = tarfile.TarInfo(member)
            info.size = size
            out.write(compress(info.tobuf(format=tarfile.PAX_FORMAT)))
            if member == name:
                for _ in range(size // len(chunk)):
                    out.write(packed)
            else:
                out.write(compress(TIMEOUT_LINE.encode() + b"\n"))
            out.write(compress(bytes(-size % tarfile.BLOCKSIZE)))
        out.write(compress(bytes(2 * tarfile.BLOCKSIZE)))


STEP_LINE = b'{"rank": 0, "step": 1, "time": 1.0, "step_s": 0.5, "data_s": 0.1, "comm_s": 0.1, "samples": 8}\n'
# Distinct lines: repeats of one line are passed over, and do not use up the matched-lines limit.
WARN_LINES = b"".join(
    f"host-0:1:2 [0] NCCL WARN NET/Socket : Connection closed by peer 10.0.{peer >> 8}.{peer & 255}<4000>\n".encode()
    for peer in range(12_000)
)
# Small limits for the bombs that need not be at the defaults to make their point, so they stay quick.
SMALL_LIMITS = {"TRAINBOT_BUNDLE_MAX_FILE_MB": "128", "TRAINBOT_BUNDLE_MAX_TOTAL_MB": "256"}


def test_a_five_gigabyte_steps_bomb_at_the_default_limits_is_cut_and_noted(tmp_path):
    archive = tmp_path / "bomb.tar.gz"
    write_bomb(archive, "gz", "steps/rank-0.jsonl", STEP_LINE, 5 << 30)
    assert archive.stat().st_size < 32 << 20
    diagnosis = diagnose_hostile(archive)
    assert diagnosis["findings"][0]["id"] == "nccl-timeout"
    assert "step records, the limit" in diagnosis["sources"]["steps/rank-0.jsonl"]
    assert "4096 MB decompressed, the limit for a bundle" in diagnosis["sources"]["bomb.tar.gz"]


@pytest.mark.parametrize(
    ("compression", "name", "line", "note"),
    [
        ("bz2", "logs/zeros.log", b"\x00", "binary content"),
        ("xz", "logs/warn.log", WARN_LINES, "lines matched trainbot's patterns, the limit"),
        ("gz", "logs/chatter.log", b"step 1 loss 0.5\n", "cut at 128 MB, the limit for one file"),
        ("bz2", "k8s/events.json", b"[{}," * 1024, "over 64 MB, the limit for a JSON file"),
    ],
)
def test_decompression_bombs_end_in_a_diagnosis_with_the_cut_noted(tmp_path, compression, name, line, note):
    archive = tmp_path / f"bomb.tar.{compression}"
    write_bomb(archive, compression, name, line, 1 << 30)
    diagnosis = diagnose_hostile(archive, SMALL_LIMITS)
    assert "nccl-timeout" in {found["id"] for found in diagnosis["findings"]}
    assert note in diagnosis["sources"][name]
    assert "256 MB decompressed, the limit for a bundle" in diagnosis["sources"][archive.name]


def test_the_deadline_stops_a_bundle_that_takes_too_long(tmp_path):
    archive = tmp_path / "slow.tar.gz"
    write_bomb(archive, "gz", "logs/chatter.log", b"step 1 loss 0.5\n", 4 << 30)
    diagnosis = diagnose_hostile(archive, {"TRAINBOT_BUNDLE_DEADLINE_S": "1"})
    assert "stopped after 1 s, the time limit" in diagnosis["sources"]["logs/chatter.log"]
    assert "nothing after logs/chatter.log was read" in diagnosis["sources"]["slow.tar.gz"]


def test_a_250_megabyte_json_array_and_a_5_gigabyte_binary_log_are_skipped_with_notes(tmp_path):
    (tmp_path / "k8s").mkdir()
    (tmp_path / "prometheus").mkdir()
    event = b'{"reason":"BackOff","message":"Back-off pulling image"}'
    (tmp_path / "k8s" / "events.json").write_bytes(b"[" + b",".join([event] * (250_000_000 // len(event))) + b"]")
    (tmp_path / "prometheus" / "up.json").write_bytes(b'{"data":{"result":[' + b"{}," * 2_000_000 + b"{}]}}")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank-5.log").write_text(TIMEOUT_LINE + "\n")
    with (tmp_path / "logs" / "core.log").open("wb") as core:
        core.write(b"starting\n" * 2000)
        core.truncate(5 << 30)  # sparse: NUL bytes that take no disk
    diagnosis = diagnose_hostile(tmp_path)
    assert diagnosis["findings"][0]["id"] == "nccl-timeout"
    assert "limit for a JSON file" in diagnosis["sources"]["k8s/events.json"]
    assert "limit for a JSON file" in diagnosis["sources"]["prometheus/up.json"]
    assert "binary content" in diagnosis["sources"]["logs/core.log"]


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
