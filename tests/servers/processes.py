"""Real servers the tests start on loopback: as processes (Prometheus, `mlflow server`, `trainbot serve`),
or in a thread of the test's own process through bot.http.server.in_thread (stand-ins, stubs, the WSGI app under
test)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

READY_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(
    command: Sequence[str], log: Path, ready_url: str, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` (output to `log`) until the block ends; yields once `ready_url` answers 200."""
    with log.open("wb") as output:
        process = subprocess.Popen(list(command), stdout=output, stderr=subprocess.STDOUT, env=env)
        try:
            _wait_ready(ready_url, process, log)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
