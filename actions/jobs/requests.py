"""What a person asks of the jobs room, typed: built in bot/ from the CLI's or Slack's words, read by planning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from actions.errors import BadRequest
from actions.jobs.backends import KUBERAY


@dataclass(frozen=True)
class ManifestText:
    """A team's own RayJob YAML, already read; `source` names it in messages (a file path)."""

    text: str
    source: str


@dataclass(frozen=True)
class SweepOptions:
    trials: int
    metric: str | None = None
    mode: Literal["min", "max"] | None = None
    scheduler: Literal["asha", "none"] = "none"


@dataclass(frozen=True)
class LaunchRequest:
    """A launch (or, with `sweep`, a Ray Tune sweep) of `template` with `key=value` words as `params`.

    With a `manifest`, the team's RayJob is the template (`template` is None) and runs on KubeRay.
    `backend`, `workers` and `gpus_per_worker` are None where the person chose nothing.
    """

    template: str | None
    params: tuple[str, ...]
    requester: str
    backend: str | None = None
    workers: int | None = None
    gpus_per_worker: int | None = None
    manifest: ManifestText | None = None
    sweep: SweepOptions | None = None

    def __post_init__(self) -> None:
        if self.manifest is not None and self.backend not in (None, KUBERAY):
            raise BadRequest(f"a RayJob manifest runs on KubeRay; drop --backend {self.backend}")

    def backend_name(self, default: str) -> str:
        """The backend this request runs on: a manifest's is KubeRay, else the one asked for or `default`."""
        if self.manifest is not None:
            return KUBERAY
        return self.backend or default
