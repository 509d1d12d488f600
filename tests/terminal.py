"""Run a command with its stdout or its stderr on a pseudo-terminal, as a person at a terminal runs it, and read
what each stream carried."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

COLUMNS, ROWS = 120, 40


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run_on_terminal(
    command: Sequence[str], env: Mapping[str, str], *, stdout: bool, stderr: bool, timeout_s: float = 120
) -> Ran:
    """Run `command` with stdout and/or stderr on one pseudo-terminal (120x40, TERM=xterm-256color), the other
    piped; the terminal's "\\r\\n" read back as "\\n"."""
    reader, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=terminal if stdout else subprocess.PIPE,
        stderr=terminal if stderr else subprocess.PIPE,
        env={**env, "TERM": "xterm-256color"},
    )
    os.close(terminal)
    seen: list[bytes] = []
    # The pty must be read while the process writes, or it blocks once the pty's buffer is full.
    draining = threading.Thread(target=_drain, args=(reader, seen), daemon=True)
    draining.start()
    try:
        piped_out, piped_err = process.communicate(timeout=timeout_s)
    finally:
        process.kill()
        draining.join(timeout=5)
        os.close(reader)
    shown = b"".join(seen).decode("utf-8", "replace").replace("\r\n", "\n")
    return Ran(
        process.returncode,
        shown if stdout else piped_out.decode("utf-8", "replace"),
        shown if stderr else piped_err.decode("utf-8", "replace"),
    )


def _drain(reader: int, seen: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(reader, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            return
        if not chunk:
            return
        seen.append(chunk)
