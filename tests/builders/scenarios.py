"""Build metric and step-timing scenarios as real bundle files (Prometheus API JSON, steps JSONL).

Used by the tests to vary label sets and sources, and by `python -m tests.builders.scenarios` to write
the metric parts of examples/bundles (a test checks the committed files match).
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

START = 1_763_800_000
STEP_S = 15
DCGM_LABELS = ("gpu", "UUID", "Hostname", "modelName", "pod", "namespace", "container")


@dataclass
class Gpu:
    host: str
    index: int
    values: dict[str, float] = field(default_factory=dict)


def dcgm_labels(gpu: Gpu, host_label: str = "Hostname", names: tuple[str, ...] = DCGM_LABELS) -> dict[str, str]:
    every = {
        "gpu": str(gpu.index),
        "UUID": f"GPU-{sum(map(ord, gpu.host)):04x}{gpu.index:04x}-5e1f-4c0d-9a7b-000000000000",
        "Hostname": gpu.host,
        "modelName": "NVIDIA H100 80GB HBM3",
        "pod": f"{gpu.host}-worker",
        "namespace": "ml",
        "container": "ray-worker",
    }
    labels = {key: every[key] for key in names}
    if host_label != "Hostname" and "Hostname" in labels:
        labels[host_label] = labels.pop("Hostname")
    return labels


def write_matrix(
    bundle: Path,
    metric: str,
    gpus: list[Gpu],
    points: int = 120,
    labels_of: Callable[[Gpu], dict[str, str]] = dcgm_labels,
    seed: int = 0,
    noise: float = 0.02,
) -> None:
    rng = random.Random(seed)
    result = []
    for gpu in gpus:
        mean = gpu.values[metric]
        values = [
            [START + i * STEP_S, f"{max(0.0, mean * (1 + rng.uniform(-noise, noise))):.4g}"] for i in range(points)
        ]
        result.append({"metric": {"__name__": metric, **labels_of(gpu)}, "values": values})
    document = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    path = bundle / "prometheus" / f"{metric}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1) + "\n")


def write_dcgm(bundle: Path, gpus: list[Gpu], host_label: str = "Hostname", **kwargs: object) -> None:
    for metric in gpus[0].values:
        write_matrix(bundle, metric, gpus, labels_of=lambda gpu: dcgm_labels(gpu, host_label), **kwargs)


def gpus(hosts: int, per_host: int, **values: float) -> list[Gpu]:
    return [Gpu(f"node-{h}", i, dict(values)) for h in range(hosts) for i in range(per_host)]


def write_steps(
    bundle: Path,
    ranks: int,
    steps: int,
    step_s: float,
    data_s: float,
    comm_s: float,
    samples: int | None = 64,
    per_rank: Mapping[int, Mapping[str, float]] | None = None,
    seed: int = 0,
) -> None:
    """One JSONL file per rank, as workloads' instrumentation writes them."""
    rng = random.Random(seed)
    folder = bundle / "steps"
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        override = dict((per_rank or {}).get(rank, {}))
        lines = []
        for step in range(steps):
            jitter = 1 + rng.uniform(-0.03, 0.03)
            record = {
                "rank": rank,
                "step": step,
                "time": START + step * step_s,
                "step_s": round(override.get("step_s", step_s) * jitter, 5),
                "data_s": round(override.get("data_s", data_s) * jitter, 5),
                "comm_s": round(override.get("comm_s", comm_s) * jitter, 5),
            }
            if samples is not None:
                record["samples"] = samples
            lines.append(json.dumps(record))
        (folder / f"rank-{rank}.jsonl").write_text("\n".join(lines) + "\n")


def write_bundle_json(bundle: Path, **fields: object) -> None:
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "bundle.json").write_text(json.dumps(fields, indent=2) + "\n")


EXAMPLE_METRICS: dict[str, Callable[[Path], None]] = {
    "comm-bound-small-batch": lambda b: (
        write_steps(b, ranks=2, steps=200, step_s=0.024, data_s=0.001, comm_s=0.015, samples=8),
        write_dcgm(b, gpus(1, 2, DCGM_FI_DEV_GPU_UTIL=96, DCGM_FI_PROF_SM_ACTIVE=0.22)),
    ),
    "io-bound-dcgm-only": lambda b: write_dcgm(
        b,
        gpus(2, 4, DCGM_FI_DEV_GPU_UTIL=31, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE=0.08, DCGM_FI_PROF_DRAM_ACTIVE=0.1),
    ),
    "compute-bound": lambda b: (
        write_steps(b, ranks=8, steps=100, step_s=0.62, data_s=0.01, comm_s=0.06, samples=64),
        write_dcgm(b, gpus(2, 4, DCGM_FI_DEV_GPU_UTIL=98, DCGM_FI_PROF_SM_ACTIVE=0.87), host_label="hostname"),
    ),
    "straggler-throttled-gpu": lambda b: (
        write_steps(
            b,
            ranks=8,
            steps=100,
            step_s=0.9,
            data_s=0.02,
            comm_s=0.35,
            per_rank={5: {"comm_s": 0.03}},
        ),
        write_dcgm(
            b,
            [
                Gpu(
                    "node-0",
                    i,
                    {"DCGM_FI_DEV_SM_CLOCK": 1410 if i == 5 else 1980, "DCGM_FI_DEV_GPU_UTIL": 97},
                )
                for i in range(8)
            ],
        ),
    ),
}


def write_examples(root: Path) -> None:
    for name, write in EXAMPLE_METRICS.items():
        write(root / name)


if __name__ == "__main__":
    write_examples(Path(sys.argv[1] if len(sys.argv) > 1 else "examples/bundles"))
