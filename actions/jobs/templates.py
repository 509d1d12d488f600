"""Job templates: what a person may launch, with which parameters, on how many workers.

A template names an entrypoint (an argv list), typed parameters with defaults and bounds, the
worker shape and who may run it. Templates come from the `templates:` mapping of the YAML config;
the built-in `tiny-transformer` runs workloads.tiny_transformer so everything works with no config.
Parameter values typed by a person are parsed by their declared type and never pasted into a
shell string: the entrypoint is an argv list that shlex.join quotes.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from actions.errors import BadRequest, Forbidden, NotFound

if TYPE_CHECKING:
    from actions.people import People

ParamValue = float | int | bool | str

# A template name becomes the prefix of DNS-1035 job names and a label value.
TEMPLATE_NAME = r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?"
PARAM_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
METRIC_NAME = r"[A-Za-z_][A-Za-z0-9_./-]{0,127}"
# Longest value accepted for one parameter; longer input is refused, not truncated.
MAX_VALUE_CHARS = 256
# What a manifest template accepts for parameters it does not declare: no shell syntax, no spaces.
FREE_VALUE = r"[A-Za-z0-9._:/@%+,=-]{1,256}"
TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Param(_Strict):
    """One typed parameter. `str` parameters must declare the pattern their values match."""

    type: Literal["float", "int", "bool", "choice", "str"]
    default: ParamValue | None = None
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    help: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Param:
        if self.type == "choice" and not self.choices:
            raise ValueError("a choice parameter needs `choices`")
        if self.type == "str":
            if not self.pattern:
                raise ValueError("a str parameter needs a `pattern` its values must match")
            re.compile(self.pattern)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def parse(self, name: str, text: str) -> ParamValue:
        """The value of `text` as this parameter's type, or BadRequest naming the parameter."""
        if len(text) > MAX_VALUE_CHARS:
            raise BadRequest(f"parameter {name}: value longer than {MAX_VALUE_CHARS} characters")
        match self.type:
            case "float":
                value: ParamValue = self._number(name, text, float)
            case "int":
                value = self._number(name, text, int)
            case "bool":
                value = self._bool(name, text)
            case "choice":
                if text not in self.choices:
                    raise BadRequest(f"parameter {name}: {text!r} is not one of {', '.join(self.choices)}")
                value = text
            case "str":
                if self.pattern is None or not re.fullmatch(self.pattern, text):
                    raise BadRequest(f"parameter {name}: {text!r} does not match the pattern {self.pattern}")
                value = text
        return value

    def check(self, name: str, value: ParamValue) -> ParamValue:
        """A value from config (a default, a sweep bound) checked as if a person typed it."""
        return self.parse(name, _as_text(value))

    def _number(self, name: str, text: str, kind: type[int] | type[float]) -> float | int:
        try:
            value = kind(text.strip()) if _plain_number(text) else None
        except ValueError:
            value = None
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            raise BadRequest(f"parameter {name}: {text!r} is not {'an integer' if kind is int else 'a number'}")
        if self.min is not None and value < self.min:
            raise BadRequest(f"parameter {name}: {value} is below the minimum {self.min:g}")
        if self.max is not None and value > self.max:
            raise BadRequest(f"parameter {name}: {value} is above the maximum {self.max:g}")
        return value

    @staticmethod
    def _bool(name: str, text: str) -> bool:
        word = text.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise BadRequest(f"parameter {name}: {text!r} is not true or false")


def _plain_number(text: str) -> bool:
    # int()/float() accept underscores, surrounding whitespace and other scripts' digits (Arabic-Indic,
    # fullwidth); a parameter value takes none of them.
    return bool(re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text))


def _as_text(value: ParamValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Range(_Strict):
    """A count a person may choose, with its default and the most allowed."""

    default: int = Field(ge=0)
    max: int = Field(ge=0)

    @model_validator(mode="after")
    def _default_within(self) -> Range:
        if self.default > self.max:
            raise ValueError(f"default {self.default} is above max {self.max}")
        return self


class RuntimeEnv(_Strict):
    pip: tuple[str, ...] = ()
    env_vars: dict[str, str] = Field(default_factory=dict)
    working_dir: str | None = None

    def to_ray(self) -> dict[str, Any]:
        """The runtime_env dict of Ray's job submission API (and of a RayJob's runtimeEnvYAML)."""
        env: dict[str, Any] = {}
        if self.pip:
            env["pip"] = list(self.pip)
        if self.env_vars:
            env["env_vars"] = dict(self.env_vars)
        if self.working_dir:
            env["working_dir"] = self.working_dir
        return env


class SweepDefaults(_Strict):
    """How a template is swept: the trainable the sweep driver calls per trial and what it optimizes."""

    trainable: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
    metric: Annotated[str, Field(pattern=f"^{METRIC_NAME}$")] = "val_loss"
    # Other metrics its trials report, which `--metric` may name instead of `metric`.
    metrics: tuple[Annotated[str, Field(pattern=f"^{METRIC_NAME}$")], ...] = ()
    mode: Literal["min", "max"] = "min"
    cpus_per_trial: float = Field(default=1.0, gt=0)

    def metric_named(self, name: str | None) -> str:
        """The metric a sweep optimizes: `name` if its trials report it, else BadRequest listing those they do."""
        if name is None:
            return self.metric
        reported = (self.metric, *self.metrics)
        if name not in reported:
            raise BadRequest(f"--metric {name!r}: its trials report {', '.join(reported)}; choose one of them")
        return name


class StudyParams(_Strict):
    """How a scaling study (trainbot scale) sizes a template's run: the parameter that is each worker's batch, the one
    that is its number of steps, and values set for every study (e.g. one epoch, so the steps are all the steps)."""

    batch: Annotated[str, Field(pattern=f"^{PARAM_NAME}$")]
    steps: Annotated[str, Field(pattern=f"^{PARAM_NAME}$")]
    fixed: dict[Annotated[str, Field(pattern=f"^{PARAM_NAME}$")], ParamValue] = Field(default_factory=dict)


class JobTemplate(_Strict):
    name: Annotated[str, Field(pattern=f"^{TEMPLATE_NAME}$")]
    description: str = ""
    entrypoint: tuple[str, ...] = ()
    params: dict[Annotated[str, Field(pattern=f"^{PARAM_NAME}$")], Param] = Field(default_factory=dict)
    workers: Range = Range(default=1, max=8)
    gpus_per_worker: Range = Range(default=0, max=8)
    cpus_per_worker: float = Field(default=1.0, gt=0)
    memory_per_worker: Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")] = "2Gi"
    image: str | None = None
    runtime_env: RuntimeEnv = RuntimeEnv()
    # Append `--num-workers N --gpus-per-worker G` to the entrypoint (the script sizes Ray Train itself).
    scaling_flags: bool = False
    # Who may launch it (names or Slack user ids, the same person either way: see `people:`); empty means everyone.
    allowed: tuple[str, ...] = ()
    sweep: SweepDefaults | None = None
    # What a scaling study sets; a template without it cannot be studied.
    study: StudyParams | None = None
    # A team's RayJob manifest: the entrypoint is theirs, and undeclared `key=value` words are
    # accepted (values matching FREE_VALUE) and appended to it as `--key value`.
    from_manifest: bool = False

    @model_validator(mode="after")
    def _has_entrypoint(self) -> JobTemplate:
        if not self.entrypoint and not self.from_manifest:
            raise ValueError("a template needs an `entrypoint` (a list of words, e.g. [python, train.py])")
        return self

    @model_validator(mode="after")
    def _study_names_params(self) -> JobTemplate:
        if self.study is not None:
            named = {self.study.batch, self.study.steps, *self.study.fixed}
            if unknown := sorted(named - set(self.params)):
                raise ValueError(f"study names parameters the template does not declare: {', '.join(unknown)}")
        return self

    @field_validator("params")
    @classmethod
    def _defaults_are_values(cls, params: dict[str, Param]) -> dict[str, Param]:
        for name, param in params.items():
            if param.default is not None:
                try:
                    param.check(name, param.default)
                except BadRequest as error:
                    raise ValueError(f"default: {error}") from None
        return params

    def authorize(self, requester: str, people: People) -> None:
        """Forbidden unless everyone may launch it or `requester` (a name or a Slack user id) is allowed to."""
        allowed, who = people.names(self.allowed), people.name(requester)
        if allowed and who not in allowed:
            raise Forbidden(f"{who} may not run template {self.name}; ask one of: {', '.join(sorted(allowed))}")

    def parse_params(self, words: list[str]) -> dict[str, ParamValue]:
        """`key=value` words as typed values over the defaults; every problem names its parameter."""
        values: dict[str, ParamValue] = {k: p.default for k, p in self.params.items() if p.default is not None}
        for word in words:
            key, value = split_assignment(word)
            param = self.params.get(key) or (FREE_PARAM if self.from_manifest else None)
            if param is None:
                known = ", ".join(sorted(self.params)) or "none"
                raise BadRequest(f"unknown parameter {key!r} for template {self.name} (known: {known})")
            values[key] = param.parse(key, value)
        return values

    def argv(self, params: dict[str, ParamValue], workers: int, gpus_per_worker: int) -> list[str]:
        """The entrypoint as an argv list: each parameter is `--name value`, two separate words."""
        words = list(self.entrypoint)
        for key in sorted(params):
            words += [f"--{key}", _as_text(params[key])]
        if self.scaling_flags:
            words += ["--num-workers", str(workers), "--gpus-per-worker", str(gpus_per_worker)]
        return words

    def size(self, workers: int | None, gpus_per_worker: int | None) -> tuple[int, int]:
        """Workers and GPUs per worker within the template's bounds (defaults where not given)."""
        chosen_workers = self.workers.default if workers is None else workers
        chosen_gpus = self.gpus_per_worker.default if gpus_per_worker is None else gpus_per_worker
        if not 1 <= chosen_workers <= self.workers.max:
            raise BadRequest(f"--workers {chosen_workers}: template {self.name} allows 1 to {self.workers.max}")
        if not 0 <= chosen_gpus <= self.gpus_per_worker.max:
            raise BadRequest(f"--gpus {chosen_gpus}: template {self.name} allows 0 to {self.gpus_per_worker.max}")
        return chosen_workers, chosen_gpus


FREE_PARAM = Param(type="str", pattern=FREE_VALUE)


def manifest_template(name: str) -> JobTemplate:
    """A team's existing RayJob as a template; its worker count is whatever its manifest says."""
    return JobTemplate(
        name=name,
        description="a RayJob manifest given with --manifest",
        workers=Range(default=1, max=10_000),
        gpus_per_worker=Range(default=0, max=64),
        from_manifest=True,
    )


def split_assignment(word: str) -> tuple[str, str]:
    key, sep, value = word.partition("=")
    if not sep or not re.fullmatch(PARAM_NAME, key):
        raise BadRequest(f"{word[:60]!r}: parameters are written key=value, e.g. lr=0.001")
    return key, value


TINY_TRANSFORMER = JobTemplate(
    name="tiny-transformer",
    description="The reference trainer: a tiny transformer language model on generated text, Ray Train DDP/FSDP.",
    entrypoint=("python", "-m", "workloads.tiny_transformer"),
    params={
        "lr": Param(type="float", default=3e-3, min=1e-6, max=1.0, help="learning rate"),
        "batch_size": Param(type="int", default=32, min=1, max=4096, help="samples per worker per step"),
        "epochs": Param(type="int", default=2, min=1, max=1000),
        "steps_per_epoch": Param(type="int", default=20, min=1, max=100_000),
        "d_model": Param(type="int", default=64, min=8, max=4096),
        "layers": Param(type="int", default=2, min=1, max=48),
        "strategy": Param(type="choice", default="ddp", choices=("ddp", "fsdp")),
        "checkpoint_every": Param(type="int", default=10, min=1, max=1_000_000, help="steps between checkpoints"),
        "seed": Param(type="int", default=0, min=0, max=2**31 - 1),
    },
    workers=Range(default=2, max=64),
    gpus_per_worker=Range(default=0, max=8),
    cpus_per_worker=1.0,
    memory_per_worker="2Gi",
    scaling_flags=True,
    sweep=SweepDefaults(
        trainable="workloads.tiny_transformer:tune_trial", metric="val_loss", metrics=("train_loss",), mode="min"
    ),
    study=StudyParams(batch="batch_size", steps="steps_per_epoch", fixed={"epochs": 1}),
)

BUILT_IN: dict[str, JobTemplate] = {TINY_TRANSFORMER.name: TINY_TRANSFORMER}


def load_templates(configured: dict[str, dict[str, Any]]) -> dict[str, JobTemplate]:
    """The built-ins plus the `templates:` mapping of the config (a configured name wins)."""
    from pydantic import ValidationError  # noqa: PLC0415

    templates = dict(BUILT_IN)
    for name, body in configured.items():
        if not isinstance(body, dict):
            raise BadRequest(f"templates.{name}: must be a mapping of template fields")
        try:
            templates[name] = JobTemplate.model_validate({**body, "name": name})
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise BadRequest(f"templates.{name} in the config is invalid: {problems}") from None
    return templates


def find_template(templates: dict[str, JobTemplate], name: str) -> JobTemplate:
    try:
        return templates[name]
    except KeyError:
        raise NotFound(f"no template {name!r}; known templates: {', '.join(sorted(templates))}") from None
