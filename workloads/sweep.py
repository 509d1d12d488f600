"""The sweep driver: one Ray Tune search over a trainable, tracked in MLflow, its best model registered.

    python -m workloads.sweep --trainable workloads.tiny_transformer:tune_trial \\
        --space '{"lr": {"loguniform": [1e-4, 1e-2]}, "d_model": {"randint": [32, 128]}, "epochs": 3}' \\
        --trials 10 --metric val_loss --mode min --tracking-uri sqlite:////data/mlflow.db \\
        --experiment tiny-transformer --model-name tiny-transformer --sweep-id sweep-7f3a

MLflow gets one parent run named after the sweep (parameters: the space) and one nested run
per trial, named after its sampled values ("lr=0.0031 d_model=64", also the Tune trial's name
and folder), holding its parameters and per-epoch metrics. The best trial's best checkpoint is
loaded here, logged as a model in its run and registered as a new version of --model-name.
Prints one JSON line at the end. Exit status: 0 with a best trial, 1 when no trial reported
the metric, 2 for a mistake in the arguments (one line on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from workloads.tune_space import SearchSpace, SpaceError, TrialNamer, parse_space

if TYPE_CHECKING:
    from ray.tune import ResultGrid, Tuner

    from workloads.sweep_tracking import SweepTracker

Trainable = Callable[[dict[str, Any]], None]
SWEEP_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
DEFAULT_STORAGE = "~/ray_results"
# ASHA's max_t when the space does not bound "epochs" (Ray's own default).
DEFAULT_MAX_EPOCHS = 100


class UsageError(ValueError):
    """An argument a person got wrong; the message names it."""


@dataclass(frozen=True)
class SweepOptions:
    trainable: str
    space: SearchSpace
    trials: int
    metric: str
    mode: Literal["min", "max"]
    tracking_uri: str
    experiment: str
    model_name: str
    sweep_id: str
    scheduler: Literal["asha", "none"] = "asha"
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    max_concurrent: int = 0
    storage_path: str = str(Path(DEFAULT_STORAGE).expanduser())
    artifact_location: str | None = None


def main(argv: list[str] | None = None) -> int:
    try:
        options = parse_options(argv)
        summary = run_sweep(options, import_trainable(options.trainable))
    except UsageError as error:
        print(f"sweep: {error}", file=sys.stderr)
        return 2
    print(json.dumps(summary), flush=True)
    return 0 if summary["best_trial"] else 1


def run_sweep(options: SweepOptions, trainable: Trainable) -> dict[str, Any]:
    """Run the search in the Ray cluster (connecting if this process has not) and record it; the summary."""
    import ray  # noqa: PLC0415 - heavy; argument errors are reported before it loads

    from workloads.sweep_tracking import SweepTracker, TrackingError  # noqa: PLC0415

    if not ray.is_initialized():
        ray.init()
    try:
        tracker = SweepTracker(
            options.tracking_uri,
            options.experiment,
            options.sweep_id,
            options.metric,
            options.mode,
            options.artifact_location,
        )
    except TrackingError as error:
        raise UsageError(str(error)) from None
    tracker.start_parent(options.space.spec, options.trainable)
    try:
        results = _tuner(options, trainable, tracker).fit()
        return _finish(options, results, tracker)
    except BaseException:
        tracker.finish_parent(None)
        raise


def _tuner(options: SweepOptions, trainable: Trainable, tracker: SweepTracker) -> Tuner:
    from ray import tune  # noqa: PLC0415
    from ray.tune.schedulers import ASHAScheduler  # noqa: PLC0415

    namer = TrialNamer(options.space.sampled)
    scheduler = None
    if options.scheduler == "asha":
        max_epochs = options.space.upper_bound("epochs") or DEFAULT_MAX_EPOCHS
        scheduler = ASHAScheduler(time_attr="epoch", max_t=max(int(max_epochs), 1), grace_period=1)
    return tune.Tuner(
        tune.with_resources(trainable, {"cpu": options.cpus_per_trial, "gpu": options.gpus_per_trial}),
        param_space=options.space.to_tune(),
        tune_config=tune.TuneConfig(
            metric=options.metric,
            mode=options.mode,
            num_samples=options.trials,
            scheduler=scheduler,
            max_concurrent_trials=options.max_concurrent or None,
            trial_name_creator=lambda trial: namer.name(trial.trial_id, trial.config),
            trial_dirname_creator=lambda trial: namer.dirname(trial.trial_id, trial.config),
        ),
        run_config=tune.RunConfig(
            name=options.sweep_id,
            storage_path=options.storage_path,
            callbacks=[tracker],
            # Only each trial's best checkpoint is kept: it is the one the driver may register.
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=1, checkpoint_score_attribute=options.metric, checkpoint_score_order=options.mode
            ),
        ),
    )


def best_trial(best_values: dict[str, float], mode: Literal["min", "max"]) -> tuple[str, float] | None:
    """The trial id with the best value, and that value; None when no trial reported a finite one."""
    finite = {trial: value for trial, value in best_values.items() if math.isfinite(value)}
    if not finite:
        return None
    pick = min if mode == "min" else max
    trial = pick(finite, key=finite.__getitem__)
    return trial, finite[trial]


def _finish(options: SweepOptions, results: ResultGrid, tracker: SweepTracker) -> dict[str, Any]:
    """Register the best trial's best checkpoint, close the parent run; the summary."""
    summary: dict[str, Any] = {
        "sweep": options.sweep_id,
        "trials": options.trials,
        "completed": sum(1 for result in results if result.error is None),
        "best_trial": None,
        "metric": options.metric,
        "value": None,
        "model": options.model_name,
        "version": None,
        "parent_run_id": tracker.parent_run_id,
    }
    # Each trial counts with its best reported value, not its last: under ASHA trials stop at
    # different epochs, and the checkpoint kept per trial is its best, so the value tagged on
    # the registered version is the value of that very model.
    best = best_trial(tracker.best_values, options.mode)
    if best is None:
        print(f"sweep: no trial reported a finite {options.metric!r}; nothing registered", file=sys.stderr)
        tracker.finish_parent(None)
        return summary
    trial_id, value = best
    name = tracker.trial_runs[trial_id].name
    summary |= {"best_trial": name, "value": value}
    trial_result = next(result for result in results if result.metrics.get("trial_id") == trial_id)
    # Ray raises, rather than returning None, for a trial without checkpoints.
    if not trial_result.best_checkpoints:
        print(f"sweep: the best trial {name!r} reported no checkpoint; no model registered", file=sys.stderr)
    else:
        checkpoint = trial_result.get_best_checkpoint(options.metric, options.mode)
        with checkpoint.as_directory() as folder:
            summary["version"] = tracker.log_best_model(trial_id, value, Path(folder), options.model_name)
    tracker.finish_parent(best, (options.model_name, summary["version"]) if summary["version"] else None)
    return summary


def import_trainable(reference: str) -> Trainable:
    """The function named by MODULE:FUNCTION; UsageError when it cannot be imported."""
    module_name, _, function_name = reference.partition(":")
    if not (re.fullmatch(r"[A-Za-z_][\w.]*", module_name) and function_name.isidentifier()):
        raise UsageError(
            f"--trainable {reference!r}: write MODULE:FUNCTION, e.g. workloads.tiny_transformer:tune_trial"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # the module's own import-time failure is the person's to see
        raise UsageError(
            f"--trainable {reference}: cannot import {module_name} ({type(error).__name__}: {error})"
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise UsageError(f"--trainable {reference}: {module_name} has no function {function_name}")
    return function


def parse_options(argv: list[str] | None = None) -> SweepOptions:
    args = _parser().parse_args(argv)
    try:
        space = parse_space(args.space)
    except SpaceError as error:
        raise UsageError(f"--space: {error}") from None
    if not re.fullmatch(SWEEP_ID, args.sweep_id):
        raise UsageError(f"--sweep-id {args.sweep_id!r}: use letters, digits, '.', '_' and '-' (at most 100)")
    for flag, value, least in (
        ("--trials", args.trials, 1),
        ("--cpus-per-trial", args.cpus_per_trial, 0.01),
        ("--gpus-per-trial", args.gpus_per_trial, 0),
        ("--max-concurrent", args.max_concurrent, 0),
    ):
        if value < least:
            raise UsageError(f"{flag} {value}: must be at least {least}")
    for flag, text in (("--metric", args.metric), ("--experiment", args.experiment), ("--model-name", args.model_name)):
        if not text.strip():
            raise UsageError(f"{flag} must not be empty")
    storage = args.storage_path or os.environ.get("TRAINBOT_STORAGE") or DEFAULT_STORAGE
    return SweepOptions(
        trainable=args.trainable,
        space=space,
        trials=args.trials,
        metric=args.metric,
        mode=args.mode,
        tracking_uri=args.tracking_uri,
        experiment=args.experiment,
        model_name=args.model_name,
        sweep_id=args.sweep_id,
        scheduler=args.scheduler,
        cpus_per_trial=args.cpus_per_trial,
        gpus_per_trial=args.gpus_per_trial,
        max_concurrent=args.max_concurrent,
        # Tune wants an absolute path or a URI (s3://, gs://).
        storage_path=storage if "://" in storage else str(Path(storage).expanduser().resolve()),
        artifact_location=args.artifact_location,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workloads.sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--trainable", required=True, help="MODULE:FUNCTION, a Ray Tune function trainable")
    parser.add_argument("--space", required=True, help="JSON search space (see workloads/tune_space.py)")
    parser.add_argument("--trials", type=int, required=True)
    parser.add_argument("--metric", required=True)
    parser.add_argument("--mode", choices=("min", "max"), required=True)
    parser.add_argument("--scheduler", choices=("asha", "none"), default="asha")
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--experiment", required=True)
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--sweep-id", required=True)
    parser.add_argument("--cpus-per-trial", type=float, default=1.0)
    parser.add_argument("--gpus-per-trial", type=float, default=0.0)
    parser.add_argument("--max-concurrent", type=int, default=0, help="0: as many as resources allow")
    parser.add_argument("--storage-path", help="Tune's storage (default $TRAINBOT_STORAGE or ~/ray_results)")
    parser.add_argument("--artifact-location", help="for a new experiment (default beside a sqlite store)")
    parser.error = _usage_error  # type: ignore[method-assign]
    return parser


def _usage_error(message: str) -> NoReturn:
    raise UsageError(message)


if __name__ == "__main__":
    raise SystemExit(main())
