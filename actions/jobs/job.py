"""A launch, a job's status, and the one interface both backends (kuberay, local) implement."""

from __future__ import annotations

import re
import secrets
import shlex
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Protocol

from actions.jobs.templates import JobTemplate, ParamValue

# KubeRay derives the RayCluster and submitter Job names from the RayJob's, so it caps it at 47.
MAX_JOB_NAME = 47
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SUFFIX_CHARS = 6
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "trainbot"
TEMPLATE_LABEL = "trainbot.dev/template"
REQUESTER_LABEL = "trainbot.dev/requester"
KIND_LABEL = "trainbot.dev/kind"
STUDY_LABEL = "trainbot.dev/study"


class JobState(StrEnum):
    """Ray's job states; KubeRay's jobStatus uses the same words."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED)


@dataclass(frozen=True)
class JobStatus:
    """What a backend says about one job now. KubeRay wipes reason/message on retry, so we record them."""

    name: str
    state: JobState
    message: str = ""
    reason: str = ""
    deployment_status: str = ""
    dashboard_url: str = ""
    cluster_name: str = ""
    submission_id: str = ""
    start_time: datetime | None = None
    end_time: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state.value,
            "message": self.message,
            "reason": self.reason,
            "deployment_status": self.deployment_status,
            "dashboard_url": self.dashboard_url,
            "cluster_name": self.cluster_name,
            "submission_id": self.submission_id,
            "start_time": self.start_time.isoformat() if self.start_time else None,
            "end_time": self.end_time.isoformat() if self.end_time else None,
        }


@dataclass(frozen=True)
class Launch:
    """Everything needed to submit one job, decided before any backend is touched."""

    name: str
    kind: Literal["train", "sweep"]
    template: JobTemplate
    params: dict[str, ParamValue]
    workers: int
    gpus_per_worker: int
    requester: str
    argv: list[str]
    env_vars: dict[str, str] = field(default_factory=dict)
    # A team's own RayJob (from --manifest): its spec is kept and only our fields are set on it;
    # then `argv` holds only the words appended to its entrypoint.
    manifest: dict[str, Any] | None = None
    # The scaling study this launch is a point of (actions/jobs/scaling.py); empty for a plain launch.
    study: str = ""

    @property
    def entrypoint(self) -> str:
        """The shell command Ray runs. A manifest's own entrypoint is kept verbatim, our words appended."""
        if self.manifest is None:
            return shlex.join(self.argv)
        own = str(self.manifest.get("spec", {}).get("entrypoint") or "")
        if not self.argv:
            return own
        # A YAML block entrypoint ends in a newline, and KubeRay hands the entrypoint to bash, which
        # would run words after that newline as a command of their own.
        return " ".join(part for part in (own.rstrip(), shlex.join(self.argv)) if part)

    @property
    def labels(self) -> dict[str, str]:
        return {
            MANAGED_BY: MANAGER,
            TEMPLATE_LABEL: self.template.name,
            REQUESTER_LABEL: label_value(self.requester),
            KIND_LABEL: self.kind,
            **({STUDY_LABEL: self.study} if self.study else {}),
        }

    def runtime_env(self) -> dict[str, Any]:
        env = self.template.runtime_env.to_ray()
        env_vars = {**env.get("env_vars", {}), **self.env_vars, "TRAINBOT_JOB": self.name}
        return {**env, "env_vars": env_vars}


@dataclass(frozen=True)
class Capacity:
    """What a backend can run at once, in all: CPUs and GPUs."""

    cpus: float
    gpus: float


class Backend(Protocol):
    """Where jobs run. `render` is the dry run: exactly what `submit` would send."""

    name: str

    def render(self, launch: Launch) -> dict[str, Any]: ...

    def submit(self, launch: Launch) -> JobStatus: ...

    def status(self, name: str) -> JobStatus: ...

    def logs(self, name: str, tail: int | None = None) -> str:
        """The job's log; with `tail`, its last lines as log_tail counts them."""
        ...

    def cancel(self, name: str, suspend: bool = False) -> JobStatus:
        """Stop the job: delete it, or with `suspend` keep it to resume later (where the backend can)."""
        ...

    def capacity(self) -> Capacity | None:
        """The CPUs and GPUs the backend has for jobs at once; None where that cannot be known from here."""
        ...

    def observe(self, timeout_s: float | None = None) -> Iterator[JobStatus]:
        """The status of every job trainbot launched here, then each change as it happens.

        Blocks between changes; returns after `timeout_s` seconds (None: never).
        """
        ...


def new_job_name(prefix: str) -> str:
    """A fresh DNS-1035 name of at most 47 characters: the prefix, cut to fit, and a random suffix."""
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(SUFFIX_CHARS))
    stem = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")
    stem = re.sub(r"^[^a-z]+", "", stem)[: MAX_JOB_NAME - SUFFIX_CHARS - 1].rstrip("-") or "job"
    name = f"{stem}-{suffix}"
    assert DNS_1035.match(name) and len(name) <= MAX_JOB_NAME, name
    return name


def label_value(text: str) -> str:
    """A Kubernetes label value (63 chars of [A-Za-z0-9._-], alphanumeric at both ends) for any user id."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:63].strip("._-")
    return value or "unknown"


def log_tail(text: str, lines: int | None) -> str:
    """The last `lines` lines of `text` (None: all of it), counted as `tail -n` counts them: only a newline ends
    a line. str.splitlines also ends one at a form feed, U+2028 and the like, which a job's log may hold."""
    if lines is None:
        return text
    if lines == 0:
        return ""
    ends_with_newline = text.endswith("\n")
    kept = (text[:-1] if ends_with_newline else text).split("\n")[-lines:]
    return "\n".join(kept) + ("\n" if ends_with_newline else "")
