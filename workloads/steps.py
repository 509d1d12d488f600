"""Step-phase instrumentation: time each training step's data wait and collectives.

Writes one JSON object a line, the steps/*.jsonl format of an evidence bundle:
{"rank", "step", "time", "step_s", "data_s", "comm_s", "samples"}, and "device" (torch's device
type, "cpu" or "cuda") when given one, so a diagnosis words itself for what the step ran on. Pass
a `sync` such as torch.cuda.synchronize so GPU work is inside the phase that launched it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TextIO

Phase = Literal["data", "comm"]


class StepTimer:
    def __init__(
        self,
        folder: Path,
        rank: int,
        sync: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.time,
        first_step: int = 0,
        device: str = "",
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._out: TextIO = (folder / f"rank-{rank}.jsonl").open("a", encoding="utf-8")
        self._rank = rank
        self._device = device
        self._sync = sync or (lambda: None)
        self._clock = clock
        self._wall_clock = wall_clock
        # A resumed run continues its step count, so a rank's file reads as one run.
        self._step = first_step
        self._phases: dict[Phase, float] = {"data": 0.0, "comm": 0.0}
        self._last: dict[str, float | int | str | None] | None = None

    @contextmanager
    def step(self, samples: int | None = None) -> Iterator[None]:
        self._phases = {"data": 0.0, "comm": 0.0}
        self._sync()
        started = self._clock()
        yield
        self._sync()
        record: dict[str, float | int | str | None] = {
            "rank": self._rank,
            "step": self._step,
            "time": round(self._wall_clock(), 3),
            "step_s": round(self._clock() - started, 6),
            "data_s": round(self._phases["data"], 6),
            "comm_s": round(self._phases["comm"], 6),
            "samples": samples,
        }
        if self._device:
            record["device"] = self._device
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()
        self._last = record
        self._step += 1

    @property
    def last_record(self) -> dict[str, float | int | str | None] | None:
        """The record of the latest finished step, as written; None before the first."""
        return self._last

    @contextmanager
    def phase(self, name: Phase) -> Iterator[None]:
        self._sync()
        started = self._clock()
        yield
        self._sync()
        self._phases[name] += self._clock() - started

    def close(self) -> None:
        self._out.close()
