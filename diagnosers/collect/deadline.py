"""One overall deadline for a collection, and per-request timeouts that never run past it."""

from __future__ import annotations

import time


class DeadlineExceeded(Exception):
    """The collection's overall deadline passed before this source finished."""


class Deadline:
    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def timeout(self, per_request_s: float) -> float:
        """A request's timeout: its own limit, cut to what is left; raises once nothing is left."""
        left = self.remaining()
        if left <= 0:
            raise DeadlineExceeded("the collection deadline passed")
        return min(per_request_s, left)
