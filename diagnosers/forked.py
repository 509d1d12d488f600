"""Share a list of independent jobs between this process and one forked beside it: both cores, one result each.

Each process takes the next job as it finishes one, in the caller's order (slowest first is best), so a few slow
jobs cannot leave one process idle. The forked process writes each result, pickled, to a temporary file as it goes;
this process reads them once the other has exited. Whatever happens to the other process (killed, crashed,
out of time) ends in a reason for each job it took and did not finish, never in a hang or a traceback here.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")

_CLAIM = struct.Struct("<I")
# Claims are written to a pipe before the fork, so all of them must fit in its buffer (64 KiB on Linux).
MAX_JOBS = 8192
# Exit status of a forked process whose work raised.
_FAILED = 70


@dataclass
class Shared(Generic[Result]):
    """Results by job index; `lost` says, for each job that has none, why."""

    results: dict[int, Result] = field(default_factory=dict)
    lost: dict[int, str] = field(default_factory=dict)


def can_fork() -> bool:
    """Forking is safe only where no other thread may hold a lock the child would inherit, and pays only on
    more than one core."""
    return hasattr(os, "fork") and threading.active_count() == 1 and _cores() > 1


def an_idle_core() -> bool:
    """Whether a second process would find a core to itself now: fewer tasks running than cores, this one
    included (Linux's /proc/loadavg; elsewhere assumed). On a machine kept busy by others, a second process
    only adds the cost of forking and of handing results across, and one process finishes sooner."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return True
    return running < _cores()


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def share(jobs: Sequence[Job], work: Callable[[Job], Result], timeout_s: float) -> Shared[Result]:
    """work(job) for every job, here and in a forked process. The forked one gets timeout_s to finish, after
    which it is killed and its unfinished jobs are lost. Where no process can be forked, all run here."""
    if len(jobs) > MAX_JOBS:
        raise ValueError(f"at most {MAX_JOBS} jobs")
    shared: Shared[Result] = Shared()
    claims_out, claims_in = os.pipe()
    os.write(claims_in, b"".join(_CLAIM.pack(index) for index in range(len(jobs))))
    os.close(claims_in)
    with tempfile.TemporaryFile() as spool:
        try:
            pid = os.fork()
        except OSError:  # out of processes or memory: one process does it all
            pid = -1
        if pid == 0:  # pragma: no cover - the forked process; its results are what the tests check
            _work_and_exit(jobs, work, claims_out, spool)
        try:
            for index in _claimed(claims_out):
                shared.results[index] = work(jobs[index])
        except BaseException:
            if pid > 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            raise
        finally:
            os.close(claims_out)
        why = _wait(pid, timeout_s) if pid > 0 else ""
        spool.seek(0)
        shared.results.update(_read_results(spool))
    for index in range(len(jobs)):
        if index not in shared.results:
            shared.lost[index] = why or "it exited before finishing"
    return shared


def _claimed(claims: int) -> Iterator[int]:
    # Every claim was in the pipe before the fork, so each read of one claim's bytes gets all of them.
    while True:
        claim = os.read(claims, _CLAIM.size)
        if len(claim) < _CLAIM.size:
            return
        yield _CLAIM.unpack(claim)[0]


def _work_and_exit(jobs: Sequence[Job], work: Callable[[Job], Result], claims: int, spool: BinaryIO) -> None:
    status = 0
    try:
        for index in _claimed(claims):
            pickle.dump((index, work(jobs[index])), spool, protocol=pickle.HIGHEST_PROTOCOL)
            spool.flush()
    except BaseException:
        status = _FAILED
    finally:
        os._exit(status)


def _read_results(spool: BinaryIO) -> dict[int, object]:
    results = {}
    while True:
        try:
            index, result = pickle.load(spool)
        except (EOFError, pickle.UnpicklingError, ValueError, TypeError):
            # The end, or a record cut short by a process that died writing it.
            return results
        results[index] = result


def _wait(pid: int, timeout_s: float) -> str:
    """Waits for the forked process; '' when it exited cleanly, else why not (killed once timeout_s is over)."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return _why(status)
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return f"it did not finish within {timeout_s:g} s and was stopped"
        _sleep_until_exit(pid, min(left, 1.0))


def _sleep_until_exit(pid: int, seconds: float) -> None:
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        time.sleep(min(seconds, 0.005))
        return
    try:
        select.select([handle], [], [], seconds)
    finally:
        os.close(handle)


def _why(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        return f"it was killed by {name}"
    code = os.waitstatus_to_exitcode(status)
    return "" if code == 0 else f"it failed with exit status {code}"
