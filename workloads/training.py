"""The training core both entry points share: one step, evaluation, epoch metrics, checkpoints.

workloads.tiny_transformer drives it from Ray Train workers (DDP/FSDP) and from a Ray Tune
trial (one process); only where they report and how many ranks they have differ.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.nn import functional

from workloads.model_checkpoint import WEIGHTS_FILE, write_model
from workloads.parallel import distribute
from workloads.steps import Phase
from workloads.synthetic_text import SEQ_LEN, VOCAB_SIZE, SyntheticLanguage
from workloads.tiny_lm import TinyLM, heads_for
from workloads.train_config import TrainConfig

TRAINING_STATE_FILE = "training.pt"
EVAL_BATCH = 128


class PhaseTimer(Protocol):
    """What a step needs of workloads.steps.StepTimer (a stand-in lets bench/ run steps untimed)."""

    def step(self, samples: int | None = None) -> AbstractContextManager[None]: ...

    def phase(self, name: Phase) -> AbstractContextManager[None]: ...

    @property
    def last_record(self) -> Mapping[str, Any] | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Boundary:
    """A point where the caller reports: the end of an epoch, a checkpoint step, or both."""

    global_step: int
    epochs_done: int
    # Per-epoch means and losses, only at the end of an epoch.
    epoch_metrics: dict[str, float] | None
    checkpoint_due: bool


class LMTraining:
    """Model, optimizer, data and position of one rank. Collective methods must be called on every rank."""

    def __init__(
        self,
        config: TrainConfig,
        timer: PhaseTimer,
        *,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | None = None,
    ) -> None:
        self.config = config
        self.timer = timer
        self.rank = rank
        self.world_size = world_size
        self.device = device or torch.device("cpu")
        self.language = SyntheticLanguage.generate(config.seed)
        # Same seed on every rank: identical initial weights whatever the strategy.
        torch.manual_seed(config.seed)
        model = TinyLM(VOCAB_SIZE, SEQ_LEN, config.d_model, config.layers, heads_for(config.d_model))
        self.model_config = model.config
        model.to(self.device)
        self.model = distribute(model, config.strategy, timer.phase, self.device) if world_size > 1 else model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr)
        self.global_step = 0
        self._epoch_sums = _EpochSums()

    def run(self) -> Iterator[Boundary]:
        """Train to the last step, pausing at each epoch end and each `checkpoint_every` step."""
        steps_per_epoch = self.config.steps_per_epoch
        while self.global_step < self.config.total_steps:
            self.train_step()
            step = self.global_step
            epoch_end = step % steps_per_epoch == 0
            # The last step always checkpoints: a finished run can be extended with more epochs.
            checkpoint_due = step % self.config.checkpoint_every == 0 or step == self.config.total_steps
            if epoch_end or checkpoint_due:
                metrics = self._finish_epoch() if epoch_end else None
                yield Boundary(step, step // steps_per_epoch, metrics, checkpoint_due)

    def train_step(self) -> None:
        """One optimizer step on this rank's share of the next global batch, timed by the timer."""
        timer = self.timer
        with timer.step(samples=self.config.batch_size):
            with timer.phase("data"):
                inputs, targets = self.language.batch(
                    self.global_step, self.config.batch_size, self.rank, self.world_size
                )
                inputs, targets = inputs.to(self.device), targets.to(self.device)
            loss = self._loss(inputs, targets)
            # The gradient collectives run inside backward (DDP's hook, FSDP's reduce-scatter): see parallel.py.
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        record = timer.last_record or {}
        self._epoch_sums.add(loss.item(), record)
        self.global_step += 1

    def _loss(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.model(inputs)
        return functional.cross_entropy(logits.reshape(-1, VOCAB_SIZE), targets.reshape(-1))

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean loss on the validation sequences (every rank evaluates all of them: FSDP needs every rank)."""
        self.model.eval()
        val = self.language.val.to(self.device)
        losses = [self._loss(chunk[:, :-1], chunk[:, 1:]).item() * len(chunk) for chunk in val.split(EVAL_BATCH)]
        self.model.train()
        return sum(losses) / len(val)

    def _finish_epoch(self) -> dict[str, float]:
        # Means over the epoch's steps this process ran: after a resume mid-epoch, those since the resume.
        sums, self._epoch_sums = self._epoch_sums, _EpochSums()
        steps = max(sums.steps, 1)
        step_s = sums.step_s / steps
        return {
            # Step-phase means are this rank's (every rank's own are in steps/rank-N.jsonl).
            "step_s": step_s,
            "data_s": sums.data_s / steps,
            "comm_s": sums.comm_s / steps,
            "samples_per_s": self.config.batch_size * self.world_size / step_s if step_s else 0.0,
            "train_loss": self._mean_over_ranks(sums.loss / steps),
            "val_loss": self.evaluate(),
        }

    def _mean_over_ranks(self, value: float) -> float:
        if self.world_size == 1:
            return value
        total = torch.tensor([value], device=self.device)
        dist.all_reduce(total)
        return total.item() / self.world_size

    def save(self, folder: Path) -> None:
        """Write the checkpoint into `folder` on rank 0; a collective (FSDP gathers the full state)."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model_state = get_model_state_dict(self.model, options=options)
        optimizer_state = get_optimizer_state_dict(self.model, self.optimizer, options=options)
        if self.rank == 0:
            write_model(folder, model_state, TinyLM, self.model_config)
            torch.save({"optimizer": optimizer_state, "global_step": self.global_step}, folder / TRAINING_STATE_FILE)

    @staticmethod
    def checkpoint_step(folder: Path) -> int:
        """The global step a checkpoint written by `save` resumes at."""
        return int(torch.load(folder / TRAINING_STATE_FILE, map_location="cpu", weights_only=True)["global_step"])

    def restore(self, folder: Path) -> None:
        """Continue from a checkpoint written by `save`: weights, optimizer state and the step count."""
        options = StateDictOptions(full_state_dict=True)
        model_state = torch.load(folder / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        training_state = torch.load(folder / TRAINING_STATE_FILE, map_location="cpu", weights_only=True)
        set_model_state_dict(self.model, model_state, options=options)
        set_optimizer_state_dict(self.model, self.optimizer, training_state["optimizer"], options=options)
        self.global_step = int(training_state["global_step"])


@dataclass
class _EpochSums:
    steps: int = 0
    loss: float = 0.0
    step_s: float = 0.0
    data_s: float = 0.0
    comm_s: float = 0.0

    def add(self, loss: float, record: Mapping[str, Any]) -> None:
        self.steps += 1
        self.loss += loss
        self.step_s += float(record.get("step_s") or 0.0)
        self.data_s += float(record.get("data_s") or 0.0)
        self.comm_s += float(record.get("comm_s") or 0.0)
