"""The reference trainer: a tiny transformer language model on generated text, with Ray Train.

    python -m workloads.tiny_transformer --lr 0.003 --strategy ddp --num-workers 2 --gpus-per-worker 0

Runs a TorchTrainer (DDP, or FSDP with --strategy fsdp; gloo on CPU, nccl on GPU) in the Ray
cluster that `ray.init()` finds (the one a Ray job runs in). Environment:
  TRAINBOT_JOB        run name (default tiny-transformer); the same name resumes from its latest checkpoint
  TRAINBOT_STORAGE    where runs and checkpoints live (default ~/ray_results)
  TRAINBOT_STEPS_DIR  where each rank writes steps/rank-N.jsonl (default <storage>/<name>/steps)
Prints one JSON line at the end: the run's name, last step, epoch metrics and checkpoint.

`tune_trial(config)` is the same training as one Ray Tune trial in one process, for
`python -m workloads.sweep --trainable workloads.tiny_transformer:tune_trial`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from workloads.parallel import STRATEGIES
from workloads.steps import StepTimer
from workloads.train_config import TrainConfig
from workloads.training import LMTraining

if TYPE_CHECKING:
    from ray.train import Checkpoint

DEFAULT_JOB = "tiny-transformer"
DEFAULT_STORAGE = "~/ray_results"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    params = {field.name: getattr(args, field.name) for field in dataclasses.fields(TrainConfig)}
    try:
        config = TrainConfig.from_mapping(params)
    except ValueError as error:
        _exit_usage(str(error))
    if args.num_workers < 1 or args.gpus_per_worker < 0:
        _exit_usage("--num-workers must be at least 1 and --gpus-per-worker at least 0")
    summary = train(config, num_workers=args.num_workers, gpus_per_worker=args.gpus_per_worker)
    print(json.dumps(summary), flush=True)
    return 0


def train(config: TrainConfig, num_workers: int, gpus_per_worker: float) -> dict[str, Any]:
    """Run (or resume) the TorchTrainer named by TRAINBOT_JOB; a summary of its result."""
    import ray  # noqa: PLC0415 - heavy, and only the training path needs it
    from ray.train import CheckpointConfig, RunConfig, ScalingConfig  # noqa: PLC0415
    from ray.train.torch import TorchConfig, TorchTrainer  # noqa: PLC0415

    name = os.environ.get("TRAINBOT_JOB") or DEFAULT_JOB
    storage = Path(os.environ.get("TRAINBOT_STORAGE") or DEFAULT_STORAGE).expanduser().resolve()
    steps_dir = Path(os.environ.get("TRAINBOT_STEPS_DIR") or storage / name / "steps").expanduser().resolve()
    use_gpu = gpus_per_worker > 0
    if not ray.is_initialized():
        ray.init()
    trainer = TorchTrainer(
        _train_worker,
        train_loop_config={"params": dataclasses.asdict(config), "steps_dir": str(steps_dir)},
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        scaling_config=ScalingConfig(
            num_workers=num_workers,
            use_gpu=use_gpu,
            resources_per_worker={"CPU": 1, "GPU": gpus_per_worker} if use_gpu else {"CPU": 1},
        ),
        # Ray Train V2 reloads the checkpoint list of a run with the same name and storage path,
        # so a restarted job's workers get its latest checkpoint from ray.train.get_checkpoint().
        run_config=RunConfig(name=name, storage_path=str(storage), checkpoint_config=CheckpointConfig(num_to_keep=2)),
    )
    result = trainer.fit()
    return {
        "job": name,
        "strategy": config.strategy,
        "workers": num_workers,
        **result.metrics,
        "checkpoint": result.checkpoint.path if result.checkpoint else None,
        "steps_dir": str(steps_dir),
    }


def _train_worker(loop_config: dict[str, Any]) -> None:
    """One Ray Train worker: resume if the run has a checkpoint, train, report at each boundary."""
    import ray.train  # noqa: PLC0415
    import ray.train.torch  # noqa: PLC0415

    context = ray.train.get_context()
    training = _start(
        TrainConfig.from_mapping(loop_config["params"]),
        ray.train.get_checkpoint(),
        Path(loop_config["steps_dir"]),
        rank=context.get_world_rank(),
        world_size=context.get_world_size(),
        device=ray.train.torch.get_device(),
    )
    _train_and_report(training, ray.train.report, ray.train.Checkpoint)


def tune_trial(config: dict[str, Any]) -> None:
    """One Ray Tune trial in this process: reports every epoch, with a checkpoint the sweep driver can load.

    `config` holds template parameters (the defaults fill the rest). `strategy` has no effect
    in one process, and checkpoints are per epoch whatever `checkpoint_every` says: the
    driver keeps each trial's best epoch.
    """
    from ray import tune  # noqa: PLC0415

    params = TrainConfig.from_mapping(config)
    params = dataclasses.replace(params, checkpoint_every=params.steps_per_epoch)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    steps_dir = Path(tune.get_context().get_trial_dir()) / "steps"
    training = _start(params, tune.get_checkpoint(), steps_dir, rank=0, world_size=1, device=device)
    _train_and_report(training, tune.report, tune.Checkpoint)


def _start(
    config: TrainConfig,
    checkpoint: Checkpoint | None,
    steps_dir: Path,
    *,
    rank: int,
    world_size: int,
    device: torch.device,
) -> LMTraining:
    """This rank's training, continued from `checkpoint` (a Ray Checkpoint) when there is one."""
    with _local_folder(checkpoint) as folder:
        timer = StepTimer(
            steps_dir,
            rank,
            sync=torch.cuda.synchronize if device.type == "cuda" else None,
            first_step=LMTraining.checkpoint_step(folder) if folder else 0,
            device=device.type,
        )
        training = LMTraining(config, timer, rank=rank, world_size=world_size, device=device)
        if folder:
            training.restore(folder)
    return training


@contextmanager
def _local_folder(checkpoint: Checkpoint | None) -> Iterator[Path | None]:
    if checkpoint is None:
        yield None
        return
    with checkpoint.as_directory() as folder:
        yield Path(folder)


def _train_and_report(training: LMTraining, report: Callable[..., None], checkpoint_type: type[Checkpoint]) -> None:
    """Train to the end; at each boundary report the metrics, with a checkpoint when one is due.

    `report` is ray.train.report or ray.tune.report (both barriers across ranks in Ray Train, so
    every rank reports; only rank 0 passes the checkpoint, which `save` writes on rank 0 only).
    """
    for boundary in training.run():
        metrics = {"epoch": boundary.epochs_done, "global_step": boundary.global_step, **(boundary.epoch_metrics or {})}
        if not boundary.checkpoint_due:
            report(metrics)
            continue
        with tempfile.TemporaryDirectory(prefix="tiny-transformer-") as folder:
            training.save(Path(folder))
            report(metrics, checkpoint=checkpoint_type.from_directory(folder) if training.rank == 0 else None)
    training.timer.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workloads.tiny_transformer", description=__doc__.splitlines()[0])
    defaults = TrainConfig()
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--batch_size", type=int, default=defaults.batch_size, help="samples per worker per step")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--steps_per_epoch", type=int, default=defaults.steps_per_epoch)
    parser.add_argument("--d_model", type=int, default=defaults.d_model)
    parser.add_argument("--layers", type=int, default=defaults.layers)
    parser.add_argument("--strategy", choices=STRATEGIES, default=defaults.strategy)
    parser.add_argument("--checkpoint_every", type=int, default=defaults.checkpoint_every, help="steps")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--gpus-per-worker", type=float, default=0)
    parser.error = _exit_usage  # type: ignore[method-assign]
    return parser


def _exit_usage(message: str) -> NoReturn:
    """A person's mistake: one line on stderr, exit status 2, no traceback."""
    print(f"tiny_transformer: {message}", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    raise SystemExit(main())
