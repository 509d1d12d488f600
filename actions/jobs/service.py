"""What the CLI and the bot call to change or read jobs: each call reaches one backend and the store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from actions.errors import NotFound
from actions.jobs.backends import backend_named
from actions.jobs.job import Backend, JobStatus, Launch
from actions.jobs.records import Event, JobRecord, Store, Transition
from actions.jobs.watcher import recorded_statuses, watch
from actions.people import People
from actions.settings import Settings


@dataclass(frozen=True)
class StatusHistory:
    """A job's status now and, for a job trainbot launched, each state it went through (else none)."""

    status: JobStatus
    history: list[Event]

    def to_dict(self) -> dict[str, object]:
        return {**self.status.to_dict(), "history": [event.to_dict() for event in self.history]}


@dataclass(frozen=True)
class Cancellation:
    """What `cancel` did: the job's status after, the action asked for, and whether its backend was asked (not
    when the job had already ended)."""

    status: JobStatus
    action: Literal["stop", "suspend"]
    requested: bool

    def to_dict(self) -> dict[str, object]:
        return {**self.status.to_dict(), "action": self.action, "requested": self.requested}


class Jobs:
    """Launches recorded in the state store; status, logs and cancel find a job by name or prefix; who launched
    a job is known by name (`people`: who is who, by default the config's `people:`)."""

    def __init__(
        self,
        settings: Settings,
        store: Store | None = None,
        backends: dict[str, Backend] | None = None,
        people: People | None = None,
    ) -> None:
        self._settings = settings
        self.people = people or People(settings.people)
        if store is None:
            settings.private_data_dir()
            store = Store(settings.state_url())
            store.create_schema()
        self.store = store
        self._backends: dict[str, Backend] = dict(backends or {})

    def backend(self, name: str | None = None) -> Backend:
        chosen = name or self._settings.backend
        if chosen not in self._backends:
            self._backends[chosen] = backend_named(self._settings, chosen)
        return self._backends[chosen]

    def launch(self, launch: Launch, backend: str | None = None) -> JobRecord:
        chosen = self.backend(backend)
        status = chosen.submit(launch)
        return self.store.record_launch(launch, chosen.name, status)

    def list(self, *, limit: int = 50, requester: str | None = None, active: bool = False) -> list[JobRecord]:
        """The newest jobs; with `requester` (a name or a Slack user id), only that person's."""
        named = None if requester is None else self.people.name(requester)
        return self.store.list_jobs(limit=limit, requester=named, active=active)

    def status(self, job: str) -> JobStatus:
        """The backend's status now, recorded in the store when trainbot launched the job."""
        return self.locate_status(job)[0]

    def status_history(self, job: str) -> StatusHistory:
        """The status now (recorded, as `status` does) and the job's history in the store."""
        status = self.status(job)
        return StatusHistory(status, self.store.history(status.name) if self.store.known(status.name) else [])

    def locate_status(self, job: str) -> tuple[JobStatus, str]:
        """The job's status now and the name of the backend that runs it."""
        name, backend = self._locate(job)
        status = backend.status(name)
        self.store.record_status(status)
        return status, backend.name

    def logs(self, job: str, tail: int | None = None) -> str:
        name, backend = self._locate(job)
        return backend.logs(name, tail)

    def cancel(self, job: str, suspend: bool = False) -> Cancellation:
        """Stop the job (or suspend it); one that has already ended is left as it is, its backend asked nothing."""
        name, backend = self._locate(job)
        action: Literal["stop", "suspend"] = "suspend" if suspend else "stop"
        status = backend.status(name)
        requested = not status.state.terminal
        if requested:
            status = backend.cancel(name, suspend)
        self.store.record_status(status)
        return Cancellation(status, action, requested)

    def observe(
        self, backend: str | None = None, timeout_s: float | None = None
    ) -> Iterator[tuple[JobStatus, Transition | None]]:
        """Each status the backend observes, recorded first, with the state change it made (None: none)."""
        return recorded_statuses(self.backend(backend), self.store, timeout_s)

    def watch(self, backend: str | None = None, timeout_s: float | None = None) -> Iterator[Transition]:
        """The state changes of trainbot's jobs on the backend, each recorded before it is yielded."""
        return watch(self.backend(backend), self.store, timeout_s)

    def recorded(self, name: str) -> JobRecord | None:
        """What the store knows of the job called `name`; None for one trainbot did not launch."""
        try:
            return self.store.get(name)
        except NotFound:
            return None

    def find(self, job: str) -> JobRecord:
        """The job trainbot launched named `job` or starting so; NotFound (or BadRequest for an ambiguous prefix)."""
        return self.store.find(job)

    def name_of(self, job: str) -> str:
        """The name trainbot knows the job by (a prefix completed), or the word as given (a Ray submission)."""
        try:
            return self.store.find(job).name
        except NotFound:
            return job

    def launched(self, job: str) -> bool:
        """Whether `job` (a name or a unique prefix) is one trainbot launched, as the state store says."""
        try:
            self.store.find(job)
        except NotFound:
            return False
        return True

    def _locate(self, job: str) -> tuple[str, Backend]:
        """A job trainbot launched (by name or unique prefix), else the name as-is on the default backend."""
        try:
            record = self.store.find(job)
        except NotFound:
            return job, self.backend()
        return record.name, self.backend(record.backend)
