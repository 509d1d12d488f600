"""The backends that run jobs, and the one registry of their names: KubeRay (RayJob custom resources) and a
Ray head on this machine.

A backend is a class with the methods of actions.jobs.job.Backend and a `name`; it is registered by one row
in BACKENDS. Its module is imported only when it is chosen, so the bot never loads Kubernetes to run locally.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, get_args

from actions.errors import BadRequest
from actions.settings import BackendName

if TYPE_CHECKING:
    from actions.jobs.job import Backend
    from actions.settings import Settings

LOCAL, KUBERAY = get_args(BackendName)


def _local(settings: Settings) -> Backend:
    from actions.jobs.backends.local import LocalBackend  # noqa: PLC0415 - only the chosen backend is imported

    return LocalBackend(settings)


def _kuberay(settings: Settings) -> Backend:
    from actions.jobs.backends.kuberay import KubeRayBackend  # noqa: PLC0415

    return KubeRayBackend(settings)


# Name -> the backend of that name, made from the settings.
BACKENDS: dict[str, Callable[[Settings], Backend]] = {LOCAL: _local, KUBERAY: _kuberay}
BACKEND_NAMES = tuple(BACKENDS)


def backend_named(settings: Settings, name: str | None = None) -> Backend:
    """The backend called `name` (default: TRAINBOT_BACKEND), or BadRequest naming those there are."""
    chosen = name or settings.backend
    if chosen not in BACKENDS:
        raise BadRequest(f"unknown backend {chosen!r}; choose {' or '.join(BACKEND_NAMES)}")
    return BACKENDS[chosen](settings)
