"""Step timings as workloads.steps.StepTimer writes them: <folder>/steps/rank-N.jsonl, one JSON object a step."""

from __future__ import annotations

import json
from pathlib import Path


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
