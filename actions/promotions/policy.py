"""Who may promote a model version to which MLflow alias, who approves, and what must hold first.

From the `promotion.targets` mapping of the YAML config. `staging` and `production` always exist
(production wants two approvals unless told otherwise); any other alias named there is a target too.
An empty or missing `requesters` list means anyone may request; approvers must be named.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from actions.errors import BadRequest, Forbidden
from actions.settings import SettingsError

DEFAULT_APPROVALS = {"production": 2}
DEFAULT_EXPIRY = timedelta(hours=24)
BUILT_IN_TARGETS = ("staging", "production")
# MLflow's alias rule: word characters and hyphens; `latest` and `v<digits>` are reserved for versions.
ALIAS = re.compile(r"[A-Za-z0-9_][-\w]{0,254}")
RESERVED_ALIAS = re.compile(r"latest|v\d+", re.IGNORECASE)
DURATION = re.compile(r"(?P<number>\d+)\s*(?P<unit>[smhdw])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
CHECK = re.compile(r"\s*(?P<metric>[A-Za-z_][\w./-]*)\s*(?P<op><=|>=|==|<|>)\s*(?P<threshold>\S+)\s*")
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
}
TARGET_KEYS = {"requesters", "approvers", "approver_groups", "approvals", "expires", "checks", "beats_current"}


@dataclass(frozen=True)
class MetricCheck:
    """`val_loss < 2.0`: a metric of the version's run against a threshold."""

    metric: str
    op: str
    threshold: float

    def holds(self, value: float) -> bool:
        return OPERATORS[self.op](value, self.threshold)

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"


@dataclass(frozen=True)
class BeatsCurrent:
    """The version must be better than the alias' current holder on `metric` (lower for mode=min)."""

    metric: str
    mode: str = "min"

    def better(self, candidate: float, holder: float) -> bool:
        return candidate < holder if self.mode == "min" else candidate > holder


@dataclass(frozen=True)
class Actor:
    """Who acts: a Slack user id (or a CLI user) and the user groups the bot found them in."""

    user: str
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TargetPolicy:
    name: str
    requesters: frozenset[str] = frozenset()
    approvers: frozenset[str] = frozenset()
    approver_groups: frozenset[str] = frozenset()
    approvals: int = 1
    expires: timedelta = DEFAULT_EXPIRY
    checks: tuple[MetricCheck, ...] = ()
    beats_current: BeatsCurrent | None = None

    def check_requester(self, actor: Actor) -> None:
        if self.requesters and actor.user not in self.requesters:
            raise Forbidden(
                f"{actor.user} may not request promotions to {self.name}; ask one of {_list(self.requesters)}"
            )

    def check_approver(self, actor: Actor, requester: str) -> None:
        if actor.user == requester:
            raise Forbidden(f"nobody approves their own request; ask an approver for {self.name}")
        if not (self.approvers or self.approver_groups):
            raise Forbidden(
                f"no approvers are configured for {self.name}: "
                f"set promotion.targets.{self.name}.approvers (or approver_groups) in the config"
            )
        if actor.user not in self.approvers and not (actor.groups & self.approver_groups):
            raise Forbidden(f"you are not an approver for {self.name}")


def promotion_targets(config: Mapping[str, Any]) -> dict[str, TargetPolicy]:
    """The targets of the `promotion:` config section (the built-in ones when it is empty)."""
    if not isinstance(config, Mapping):
        raise SettingsError("promotion: must be a mapping with a `targets:` mapping")
    targets = config.get("targets") or {}
    if not isinstance(targets, Mapping):
        raise SettingsError("promotion.targets: must map each target alias to its policy")
    policies = {name: TargetPolicy(name=name, approvals=DEFAULT_APPROVALS.get(name, 1)) for name in BUILT_IN_TARGETS}
    for name, body in targets.items():
        policies[str(name)] = _target(str(name), body or {})
    return policies


def target_policy(targets: Mapping[str, TargetPolicy], name: str) -> TargetPolicy:
    if name not in targets:
        raise BadRequest(f"unknown target {name!r}; the targets are {_list(targets)} (promotion.targets in the config)")
    return targets[name]


def parse_check(text: str) -> MetricCheck:
    matched = CHECK.fullmatch(text)
    threshold = _number(matched["threshold"]) if matched else None
    if not matched or threshold is None:
        raise ValueError(f"{text!r} is not a check like 'val_loss < 2.0'")
    return MetricCheck(matched["metric"], matched["op"], threshold)


def parse_duration(text: str) -> timedelta:
    """`24h`, `90m`, `2d`, `1d12h`."""
    spans = list(DURATION.finditer(text))
    if not spans or "".join(span.group(0) for span in spans) != text.replace(" ", ""):
        raise ValueError(f"{text!r} is not a duration like 24h, 90m or 2d")
    seconds = sum(int(span["number"]) * UNIT_SECONDS[span["unit"]] for span in spans)
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return timedelta(seconds=seconds)


def _target(name: str, body: Any) -> TargetPolicy:
    where = f"promotion.targets.{name}"
    if not ALIAS.fullmatch(name) or RESERVED_ALIAS.fullmatch(name):
        raise SettingsError(f"{where}: {name!r} cannot be an MLflow alias (letters, digits, _ and -; not latest or vN)")
    if not isinstance(body, Mapping):
        raise SettingsError(f"{where}: must be a mapping (requesters, approvers, approvals, expires, checks)")
    if unknown := sorted(set(map(str, body)) - TARGET_KEYS):
        raise SettingsError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(TARGET_KEYS))}")
    try:
        approvals = int(body.get("approvals", DEFAULT_APPROVALS.get(name, 1)))
        if approvals < 1:
            raise ValueError("approvals must be 1 or more")
        return TargetPolicy(
            name=name,
            requesters=_ids(body.get("requesters")),
            approvers=_ids(body.get("approvers")),
            approver_groups=_ids(body.get("approver_groups")),
            approvals=approvals,
            expires=parse_duration(str(body["expires"])) if body.get("expires") else DEFAULT_EXPIRY,
            checks=tuple(parse_check(str(check)) for check in body.get("checks") or ()),
            beats_current=_beats_current(body.get("beats_current")),
        )
    except (TypeError, ValueError) as error:
        raise SettingsError(f"{where}: {error}") from None


def _beats_current(value: Any) -> BeatsCurrent | None:
    if not value:
        return None
    if isinstance(value, str):
        return BeatsCurrent(value)
    if isinstance(value, Mapping) and value.get("metric") and value.get("mode", "min") in ("min", "max"):
        return BeatsCurrent(str(value["metric"]), str(value.get("mode", "min")))
    raise ValueError("beats_current: give a metric name, or {metric: NAME, mode: min|max}")


def _ids(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f"expected a list of Slack ids, got {value!r}")
    return frozenset(str(item) for item in value)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _list(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "(nobody)"
