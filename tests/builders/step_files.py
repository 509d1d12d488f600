"""Step timings as workloads.steps.StepTimer writes them: <folder>/steps/rank-N.jsonl, one JSON object a step."""

from __future__ import annotations

import json
from pathlib import Path

from actions.jobs.job import JobState, JobStatus
from actions.jobs.records import Store
from tests.builders.job_records import launch


def write_steps(
    folder: Path, ranks: int, step_s: float, *, data_s: float = 0.0, comm_s: float = 0.0, samples: int = 32,
    steps: int = 20,
) -> Path:  # fmt: skip
    """`ranks` ranks of `steps` steps each, every step alike (rank r a millisecond slower per r); the steps folder."""
    folder = folder / "steps"
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        lines = [
            json.dumps(
                {
                    "rank": rank,
                    "step": step,
                    "time": 1_700_000_000.0 + step,
                    "step_s": step_s + rank / 1000,
                    "data_s": data_s,
                    "comm_s": comm_s,
                    "samples": samples,
                }
            )
            for step in range(steps)
        ]
        (folder / f"rank-{rank}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


# Two finished runs of tiny-transformer: A on one worker, compute-bound; B on two, its steps half collectives.
RUN_A, RUN_B = "tiny-transformer-aaa111", "tiny-transformer-bbb222"


def record_two_runs(store: Store, data_dir: Path) -> None:
    """RUN_A and RUN_B in the state store, as the local backend records them, with their steps under runs/."""
    for name, workers, strategy in ((RUN_A, 1, "ddp"), (RUN_B, 2, "fsdp")):
        store.record_launch(launch(name, params={"lr": 0.001, "strategy": strategy}, workers=workers), "local",
                            JobStatus(name, JobState.SUCCEEDED))  # fmt: skip
    write_steps(data_dir / "runs" / RUN_A, ranks=1, step_s=0.1, data_s=0.01, samples=32)
    write_steps(data_dir / "runs" / RUN_B, ranks=2, step_s=0.15, data_s=0.01, comm_s=0.07, samples=16)
