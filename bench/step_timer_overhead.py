"""What workloads.steps.StepTimer costs a real tiny-transformer training step.

One process runs the reference trainer's step (workloads.training.LMTraining, the template's
defaults, one CPU thread like a one-CPU Ray worker) in alternating blocks: timed by a StepTimer
writing steps/rank-0.jsonl, and untimed (a stand-in whose contexts do nothing). It prints the
median step of each, their ratio, and the timer's own bookkeeping per step (a step record with
a data and a comm phase around no work) as a share of the untimed median: that share is the
overhead proper, the ratio the end-to-end check (noisy at the 1% level on a busy machine).

    python bench/step_timer_overhead.py [--blocks 20] [--block-steps 10] [--max-share 0.01]

Exit status 0 when the bookkeeping share is below --max-share and the ratio below 1 + --max-share
plus the measured noise (half the spread of the untimed blocks' medians).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch

# Run as a script from the repo root: make `workloads` importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workloads.steps import Phase, StepTimer
from workloads.training import LMTraining, TrainConfig

WARMUP_STEPS = 20
BOOKKEEPING_REPEATS = 5000


class Untimed:
    """The PhaseTimer interface doing nothing: the step's code path without instrumentation."""

    last_record = None

    def step(self, samples: int | None = None) -> AbstractContextManager[None]:
        return nullcontext()

    def phase(self, name: Phase) -> AbstractContextManager[None]:
        return nullcontext()

    def close(self) -> None:
        pass


def step_seconds(training: LMTraining, steps: int) -> list[float]:
    durations = []
    for _ in range(steps):
        started = time.perf_counter()
        training.train_step()
        durations.append(time.perf_counter() - started)
    return durations


def bookkeeping_seconds(timer: StepTimer) -> float:
    """Mean cost of one timed step around no work: the timer's own clock reads, record and write."""
    started = time.perf_counter()
    for _ in range(BOOKKEEPING_REPEATS):
        with timer.step(samples=32):
            with timer.phase("data"):
                pass
            with timer.phase("comm"):
                pass
    return (time.perf_counter() - started) / BOOKKEEPING_REPEATS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20, help="blocks per arm, alternating")
    parser.add_argument("--block-steps", type=int, default=10)
    parser.add_argument("--max-share", type=float, default=0.01)
    args = parser.parse_args()
    # A one-CPU Ray worker runs torch with one thread (Ray sets OMP_NUM_THREADS to the CPUs it gives).
    torch.set_num_threads(1)
    untimed = Untimed()
    with tempfile.TemporaryDirectory(prefix="step-timer-") as folder:
        timer = StepTimer(Path(folder) / "steps", rank=0)
        training = LMTraining(TrainConfig(), untimed)
        step_seconds(training, WARMUP_STEPS)
        timed_steps: list[float] = []
        untimed_blocks: list[list[float]] = []
        for _ in range(args.blocks):
            training.timer = timer
            timed_steps += step_seconds(training, args.block_steps)
            training.timer = untimed
            untimed_blocks.append(step_seconds(training, args.block_steps))
        bookkeeping = bookkeeping_seconds(timer)
        timer.close()
    untimed_steps = [duration for block in untimed_blocks for duration in block]
    timed_median = statistics.median(timed_steps)
    untimed_median = statistics.median(untimed_steps)
    block_medians = sorted(statistics.median(block) for block in untimed_blocks)
    noise = (block_medians[-1] - block_medians[0]) / 2 / untimed_median
    ratio = timed_median / untimed_median
    share = bookkeeping / untimed_median
    print(f"steps per arm      {len(timed_steps)} (alternating blocks of {args.block_steps})")
    print(f"untimed step       median {untimed_median * 1e3:.3f} ms")
    print(f"timed step         median {timed_median * 1e3:.3f} ms")
    print(f"ratio timed/untimed {ratio:.4f} (block-to-block noise ±{noise:.2%})")
    print(f"timer bookkeeping  {bookkeeping * 1e6:.1f} us per step = {share:.3%} of a step")
    return 0 if share < args.max_share and ratio < 1 + args.max_share + noise else 1


if __name__ == "__main__":
    raise SystemExit(main())
