"""The sweep driver's cost over plain Ray Tune with MLflow's usual callback, on cheap trials.

The same trials (a few epochs of a formula and a short sleep each, so Tune's scheduling and the
tracking dominate, not compute) run through (a) workloads.sweep.run_sweep, called in this
process, and (b) a plain ray.tune.Tuner with ray.air.integrations.mlflow.MLflowLoggerCallback.
Both share one local Ray instance and log to a fresh sqlite MLflow store each run; the arms
alternate (order swapped every repeat) and the medians of their wall times are compared.

    flock /tmp/trainbot-ray.lock .venv/bin/python bench/sweep_overhead.py [--trials 10] [--repeat 3]

Starts and stops its own local Ray instance: run it under the lock like every Ray command here.
Exit status 0 when driver/plain <= --max-ratio (default 1.05).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script from the repo root: make `workloads` importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# A local ray.init() otherwise writes ~/.ray/auth_token, and from then on every `ray start` on
# this machine requires it: the test fixture's head would stop answering unauthenticated probes.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray
from ray import tune
from ray.air.integrations.mlflow import MLflowLoggerCallback

from bench.arms import median_line
from workloads.sweep import SweepOptions, run_sweep
from workloads.tune_space import SearchSpace, parse_space

METRIC = "loss"
EXPERIMENT = "sweep-overhead"


def cheap_trial(config: dict[str, Any]) -> None:
    """A trainable whose epochs cost a sleep: the wall time is Tune's and the tracking's."""
    for epoch in range(1, config["epochs"] + 1):
        time.sleep(config["sleep_s"])
        tune.report({"epoch": epoch, METRIC: (config["x"] - 0.3) ** 2 + 1 / epoch})


def driver_arm(space: SearchSpace, trials: int, workdir: Path) -> None:
    options = SweepOptions(
        trainable="bench.sweep_overhead:cheap_trial",
        space=space,
        trials=trials,
        metric=METRIC,
        mode="min",
        scheduler="none",
        tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}",
        experiment=EXPERIMENT,
        model_name="sweep-overhead",
        sweep_id=workdir.name,
        storage_path=str(workdir / "ray"),
    )
    summary = run_sweep(options, cheap_trial)
    assert summary["completed"] == trials, summary


def plain_arm(space: SearchSpace, trials: int, workdir: Path) -> None:
    tuner = tune.Tuner(
        tune.with_resources(cheap_trial, {"cpu": 1}),
        param_space=space.to_tune(),
        tune_config=tune.TuneConfig(metric=METRIC, mode="min", num_samples=trials),
        run_config=tune.RunConfig(
            name=workdir.name,
            storage_path=str(workdir / "ray"),
            callbacks=[
                MLflowLoggerCallback(tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}", experiment_name=EXPERIMENT)
            ],
        ),
    )
    results = tuner.fit()
    assert sum(1 for result in results if result.error is None) == trials


def timed(arm: Callable[[SearchSpace, int, Path], None], space: SearchSpace, trials: int, workdir: Path) -> float:
    started = time.perf_counter()
    arm(space, trials, workdir)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--sleep-s", type=float, default=0.1, help="per epoch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=4, help="logical CPUs of the local Ray instance")
    parser.add_argument("--max-ratio", type=float, default=1.05)
    args = parser.parse_args()
    space = parse_space(json.dumps({"x": {"uniform": [0, 1]}, "epochs": args.epochs, "sleep_s": args.sleep_s}))
    arms = {"driver": driver_arm, "plain": plain_arm}
    walls: dict[str, list[float]] = {name: [] for name in arms}
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as root:
            for repeat in range(args.repeat):
                order = list(arms) if repeat % 2 == 0 else list(reversed(arms))
                for name in order:
                    workdir = Path(root) / f"{name}-{repeat}"
                    workdir.mkdir()
                    walls[name].append(timed(arms[name], space, args.trials, workdir))
                    print(f"repeat {repeat} {name:6} {walls[name][-1]:.2f} s", file=sys.stderr)
    finally:
        ray.shutdown()
    driver, plain = statistics.median(walls["driver"]), statistics.median(walls["plain"])
    print(f"{args.trials} trials x {args.epochs} epochs, {args.repeat} runs per arm, alternating")
    print(median_line("driver (workloads.sweep.run_sweep)     ", walls["driver"]))
    print(median_line("plain Tune + MLflowLoggerCallback      ", walls["plain"]))
    print(f"ratio driver/plain {driver / plain:.3f} (aim <= {args.max_ratio})")
    return 0 if driver / plain <= args.max_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
