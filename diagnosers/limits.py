"""What reading one bundle may cost: decompressed bytes per file and in all, and seconds.

A hostile bundle (a few KB of bz2 that expand to gigabytes, a log of binary junk, a JSON file
of millions of empty objects) must end in a diagnosis of what was read, with the cut written
under `sources`, not in an exhausted host. Every byte the loader reads passes through a
CountedReader, which counts it, so sizes claimed by an archive's headers are never trusted.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    # One file of an archive, decompressed. Folder files are on disk at their real size: only time bounds them.
    file_bytes: int = 2048 * MIB
    # A whole archive, decompressed, counting what is skipped to reach the next file.
    total_bytes: int = 4096 * MIB
    # Reading and scanning the whole bundle; the rules afterwards take milliseconds.
    seconds: float = 45.0


class BudgetSpent(Exception):
    """The bundle's bytes or seconds are spent: reading stops; the message says which, for `sources`."""


class Budget:
    """Running counts for one bundle against its Limits."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._deadline = clock() + limits.seconds
        self.total_bytes = 0

    def spend(self, count: int) -> None:
        """Count decompressed bytes of the archive; raises once the total or the time is spent."""
        self.total_bytes += count
        if self.total_bytes > self.limits.total_bytes:
            raise BudgetSpent(
                f"stopped after {self.limits.total_bytes // MIB} MB decompressed, the limit for a bundle "
                "(TRAINBOT_BUNDLE_MAX_TOTAL_MB)"
            )
        self.check_time()

    def check_time(self) -> None:
        if self._clock() > self._deadline:
            raise BudgetSpent(
                f"stopped after {self.limits.seconds:g} s, the time limit for reading a bundle "
                "(TRAINBOT_BUNDLE_DEADLINE_S)"
            )


class CountedReader(io.RawIOBase):
    """A read-only stream that checks the budget on every read and, with `max_bytes`, ends there.

    Past `max_bytes` it reports end of file and sets `cut`, so a parser finishes what it has; a spent
    budget raises BudgetSpent instead, so the whole load unwinds.
    """

    def __init__(self, raw: BinaryIO, budget: Budget, max_bytes: int | None = None, *, archive: bool = False) -> None:
        super().__init__()
        self._raw = raw
        self._budget = budget
        self._left = max_bytes
        self._archive = archive
        self.cut = False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._left is not None:
            if self._left <= 0:
                # One byte more tells a file that ends exactly at the limit from one that goes on.
                self.cut = bool(self._raw.read(1))
                return 0
            view = view[: self._left]
        self._budget.check_time()
        got = self._raw.readinto(view)  # type: ignore[attr-defined]
        if got and self._archive:
            self._budget.spend(got)
        if got and self._left is not None:
            self._left -= got
        return got or 0
