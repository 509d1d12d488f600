"""Sweep search spaces as people write them, and trial names made of the sampled values.

A space is a JSON object of parameter names. A value that is an object names one distribution;
any other value is fixed for every trial:

    {"lr": {"loguniform": [1e-4, 1e-2]}, "d_model": {"randint": [32, 128]},
     "strategy": {"choice": ["ddp", "fsdp"]}, "x": {"uniform": [0, 1]}, "epochs": 3}

randint bounds are both inclusive, like the min and max of a template parameter (Ray Tune's
randint excludes its upper bound; the conversion adds one).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DISTRIBUTIONS = ("choice", "loguniform", "randint", "uniform")
# Significant digits of a sampled float in a trial name: lr=0.0031, short and stable.
NAME_DIGITS = 2
MAX_DIRNAME_CHARS = 100


class SpaceError(ValueError):
    """A space a person wrote that cannot be swept; the message names the parameter and the fix."""


@dataclass(frozen=True)
class SearchSpace:
    """The space as written (for the record) and which parameters are sampled, in written order."""

    spec: dict[str, Any]
    sampled: tuple[str, ...]

    def to_tune(self) -> dict[str, Any]:
        """The Ray Tune param_space: a sampler per distribution, fixed values as they are."""
        from ray import tune  # noqa: PLC0415 - keeps parsing (and its unit tests) free of Ray

        samplers: dict[str, Callable[[list[Any]], Any]] = {
            "choice": tune.choice,
            "loguniform": lambda bounds: tune.loguniform(*bounds),
            "uniform": lambda bounds: tune.uniform(*bounds),
            "randint": lambda bounds: tune.randint(bounds[0], bounds[1] + 1),
        }
        space: dict[str, Any] = {}
        for name, value in self.spec.items():
            if name in self.sampled:
                ((distribution, argument),) = value.items()
                space[name] = samplers[distribution](argument)
            else:
                space[name] = value
        return space

    def upper_bound(self, name: str) -> float | None:
        """The largest value `name` can take, when it is numeric (ASHA's max_t for `epochs`)."""
        value = self.spec.get(name)
        if name not in self.sampled:
            return float(value) if _is_number(value) else None
        ((distribution, argument),) = value.items()
        candidates = argument if distribution == "choice" else argument[1:]
        numbers = [float(item) for item in candidates if _is_number(item)]
        return max(numbers) if len(numbers) == len(candidates) else None


def parse_space(text: str) -> SearchSpace:
    """The space in `text` (JSON), checked; SpaceError says what is wrong and where."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as error:
        raise SpaceError(f"the space is not valid JSON: {error}") from None
    if not isinstance(spec, dict):
        raise SpaceError('the space must be a JSON object of parameters, e.g. {"lr": {"loguniform": [1e-4, 1e-2]}}')
    sampled = []
    for name, value in spec.items():
        if not name:
            raise SpaceError("the space has a parameter with an empty name")
        if isinstance(value, dict):
            _check_distribution(name, value)
            sampled.append(name)
    return SearchSpace(spec=spec, sampled=tuple(sampled))


def _check_distribution(name: str, value: dict[str, Any]) -> None:
    if len(value) != 1 or next(iter(value)) not in DISTRIBUTIONS:
        written = ", ".join(value) or "nothing"
        raise SpaceError(
            f"parameter {name}: {written} is not a distribution; write one of {', '.join(DISTRIBUTIONS)}, "
            'e.g. {"loguniform": [0.0001, 0.01]}'
        )
    ((distribution, argument),) = value.items()
    if distribution == "choice":
        if not isinstance(argument, list) or not argument:
            raise SpaceError(f"parameter {name}: choice takes a non-empty list of values")
        return
    bounds_ok = isinstance(argument, list) and len(argument) == 2 and all(_is_number(bound) for bound in argument)
    if not bounds_ok:
        raise SpaceError(f"parameter {name}: {distribution} takes two numbers [low, high]")
    low, high = argument
    if distribution == "randint":
        if not all(isinstance(bound, int) for bound in argument) or low > high:
            raise SpaceError(f"parameter {name}: randint takes two integers [low, high] with low <= high")
    elif not low < high:
        raise SpaceError(f"parameter {name}: {distribution} needs low < high, got [{low}, {high}]")
    elif distribution == "loguniform" and low <= 0:
        raise SpaceError(f"parameter {name}: loguniform needs low > 0, got {low}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def trial_name(config: Mapping[str, Any], sampled: tuple[str, ...]) -> str:
    """A trial's sampled values in space order, e.g. "lr=0.0031 d_model=64"; "trial" when nothing is sampled."""
    return " ".join(f"{name}={_short(config.get(name))}" for name in sampled) or "trial"


def _short(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.{NAME_DIGITS}g}"
    return str(value)


def dirname(name: str) -> str:
    """A trial name as a folder name: no spaces or characters that paths and storage URIs treat specially."""
    folder = re.sub(r"[^A-Za-z0-9._=+-]", "-", name.replace(" ", "_").replace("#", ""))
    return folder[:MAX_DIRNAME_CHARS]


class TrialNamer:
    """Names trials by their sampled values; a name seen before gets " #2", " #3" in creation order.

    Tune calls it as trial_name_creator and trial_dirname_creator, both once per trial, so names
    are kept by trial id: a trial's folder is always the folder form of its name.
    """

    def __init__(self, sampled: tuple[str, ...]) -> None:
        self._sampled = sampled
        self._names: dict[str, str] = {}
        self._uses: dict[str, int] = {}

    def name(self, trial_id: str, config: Mapping[str, Any]) -> str:
        if trial_id not in self._names:
            base = trial_name(config, self._sampled)
            uses = self._uses[base] = self._uses.get(base, 0) + 1
            self._names[trial_id] = base if uses == 1 else f"{base} #{uses}"
        return self._names[trial_id]

    def dirname(self, trial_id: str, config: Mapping[str, Any]) -> str:
        return dirname(self.name(trial_id, config))
