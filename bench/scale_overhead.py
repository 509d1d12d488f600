"""The scaling study driver's wall time against launching the same jobs by hand, in one run.

Both arms run the same points of tiny-transformer (by default 1 and 2 workers, 36 measured steps each) one after
another on one local Ray head: (a) actions.jobs.scaling.run_study, which records the study, launches, waits,
measures each point and makes the table; (b) by hand: Jobs.launch of the same launches, each waited for with
the same poll interval. The arms alternate (order swapped every repeat) and their medians are compared.

    .venv/bin/python -m bench.scale_overhead [--sizes 1,2] [--steps 36] [--repeat 2]

Starts its own local head in a fresh data directory and stops exactly that head. Exit status 0 when
driver/by-hand <= --max-ratio (default 1.05).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from actions.jobs.backends.local_head import ensure_head, stop_head
from actions.jobs.job import JobState
from actions.jobs.scaling import ScaleRequest, StudyPlan, plan_study, run_study
from actions.jobs.service import Jobs
from actions.jobs.studies import StudyStatus, StudyStore
from actions.settings import Settings
from bench.arms import median_line

POLL_S = 0.5


def driver_arm(settings: Settings, jobs: Jobs, studies: StudyStore, plan: StudyPlan) -> None:
    result = run_study(settings, jobs, studies, plan, poll_s=POLL_S)
    assert result.study.status is StudyStatus.SUCCEEDED, result.study.reason


def by_hand_arm(settings: Settings, jobs: Jobs, studies: StudyStore, plan: StudyPlan) -> None:
    for launch in plan.launches:
        name = jobs.launch(launch, plan.backend).name
        while not (status := jobs.status(name)).state.terminal:
            time.sleep(POLL_S)
        assert status.state == JobState.SUCCEEDED, status


Arm = Callable[[Settings, Jobs, StudyStore, StudyPlan], None]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1,2")
    parser.add_argument("--steps", type=int, default=36)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=4, help="logical CPUs of the local Ray head")
    parser.add_argument("--max-ratio", type=float, default=1.05)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    arms: dict[str, Arm] = {"driver": driver_arm, "by hand": by_hand_arm}
    walls: dict[str, list[float]] = {name: [] for name in arms}
    sizes = tuple(int(size) for size in args.sizes.split(","))
    with tempfile.TemporaryDirectory(prefix="tbso-", dir="/tmp") as data_dir:
        settings = Settings(data_dir=Path(data_dir), local_num_cpus=args.cpus)
        try:
            ensure_head(settings)
            jobs, studies = Jobs(settings), StudyStore(settings.state_url())
            studies.create_schema()
            asked = ScaleRequest("tiny-transformer", ("batch_size=32",), "bench", sizes, steps=args.steps)
            # Untimed: the head's first job waits for its job agent; neither arm should pay for that.
            by_hand_arm(settings, jobs, studies, plan_study(settings, replace(asked, sizes=(1, 2), steps=1)))
            for repeat in range(args.repeat):
                for name in list(arms) if repeat % 2 == 0 else list(reversed(arms)):
                    plan = plan_study(settings, asked)  # fresh job names for each run
                    started = time.perf_counter()
                    arms[name](settings, jobs, studies, plan)
                    walls[name].append(time.perf_counter() - started)
                    print(f"repeat {repeat} {name:8} {walls[name][-1]:.2f} s", file=sys.stderr)
        finally:
            stop_head(settings)
    driver, by_hand = statistics.median(walls["driver"]), statistics.median(walls["by hand"])
    print(f"tiny-transformer at {args.sizes} workers, {args.steps} measured steps a point, {args.repeat} runs an arm")
    print(median_line("driver (run_study)         ", walls["driver"]))
    print(median_line("by hand (launch and wait)  ", walls["by hand"]))
    print(f"ratio driver/by hand {driver / by_hand:.3f} (aim <= {args.max_ratio})")
    return 0 if driver / by_hand <= args.max_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
