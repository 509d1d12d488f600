"""The reference trainer's parameters: the tiny-transformer template's, typed and checked."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workloads.parallel import STRATEGIES, Strategy


@dataclass(frozen=True)
class TrainConfig:
    """The tiny-transformer template's parameters, with its defaults (actions/jobs/templates.py)."""

    lr: float = 3e-3
    batch_size: int = 32
    epochs: int = 2
    steps_per_epoch: int = 20
    d_model: int = 64
    layers: int = 2
    strategy: Strategy = "ddp"
    checkpoint_every: int = 10
    seed: int = 0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Values by parameter name (a Tune config, parsed flags); the defaults fill what is missing."""
        known = {field.name: field for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
        typed = {name: _typed(name, known[name].type, value) for name, value in values.items()}
        config = cls(**typed)
        config.check()
        return config

    def check(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, not {self.lr}")
        for name in ("batch_size", "epochs", "steps_per_epoch", "d_model", "layers", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.seed < 0:
            raise ValueError(f"seed must not be negative, not {self.seed}")

    @property
    def total_steps(self) -> int:
        return self.epochs * self.steps_per_epoch


def _typed(name: str, annotation: object, value: Any) -> Any:
    # Annotations are strings here (from __future__ import annotations).
    if annotation == "int":
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise ValueError(f"{name} must be an integer, not {value!r}")
        return int(value)
    if annotation == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{name} must be a number, not {value!r}")
        return float(value)
    return value
