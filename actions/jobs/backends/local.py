"""The embedded backend: jobs on a Ray head on this machine, through Ray's JobSubmissionClient."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from actions.errors import BadRequest, Conflict, NotFound, Unavailable
from actions.jobs.backends import LOCAL
from actions.jobs.backends.local_head import ensure_head, find_head, gcs_address, head_location
from actions.jobs.job import MANAGED_BY, MANAGER, Capacity, JobState, JobStatus, Launch, log_tail
from actions.jobs.watcher import poll_changes
from actions.service_failure import failure_reason
from actions.settings import Settings

if TYPE_CHECKING:
    from ray.job_submission import JobDetails

    from actions.jobs.backends.ray_jobs_client import TimedJobSubmissionClient

POLL_INTERVAL_S = 2.0
NOT_FOUND = re.compile(r"status code 404|does not exist", re.IGNORECASE)
TAKEN = re.compile(r"already exists", re.IGNORECASE)
# A head that just started answers this until its job agent is up (seconds; longer on a busy machine).
AGENT_STARTING = re.compile(r"No available agent to submit job", re.IGNORECASE)
AGENT_WAIT_S = 60.0
AGENT_RETRY_S = 1.0
# Ray's state API: every node of the cluster with the resources it was started with.
NODES_ENDPOINT = "/api/v0/nodes"


class LocalBackend:
    name = LOCAL

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: TimedJobSubmissionClient | None = None
        self._url = ""
        # (connect, read) seconds for each request to the dashboard.
        self._timeout = (settings.connect_timeout_s, settings.read_timeout_s)

    def render(self, launch: Launch) -> dict[str, Any]:
        """The arguments of JobSubmissionClient.submit_job, as the dry run shows them."""
        runtime_env = launch.runtime_env()
        # Checkpoints and step timings land under the data directory, beside the state store.
        storage = str(self._settings.runs_dir())
        runtime_env["env_vars"] = {**runtime_env["env_vars"], "TRAINBOT_STORAGE": storage}
        # Only the driver is told its cluster's address: Ray Train's own actors (its placement-group cleaner)
        # look for "the" local cluster and, beside another checkout's head, find two and fail.
        if address := gcs_address(self._settings):
            runtime_env["env_vars"]["RAY_ADDRESS"] = address
        return {
            "submission_id": launch.name,
            "entrypoint": launch.entrypoint,
            "runtime_env": runtime_env,
            "metadata": launch.labels,
        }

    def submit(self, launch: Launch) -> JobStatus:
        client = self._connect(start=True)
        deadline = time.monotonic() + AGENT_WAIT_S
        while True:
            try:
                client.submit_job(**self.render(launch))
                return self.status(launch.name)
            except RuntimeError as error:
                if TAKEN.search(str(error)):
                    raise Conflict(f"a local Ray job named {launch.name} already exists; launch again") from None
                if not (AGENT_STARTING.search(str(error)) and time.monotonic() < deadline):
                    raise Unavailable(f"the local Ray head refused the job: {_first_line(error)}") from None
            except OSError as error:
                raise self._unreachable(error) from None
            time.sleep(AGENT_RETRY_S)

    def status(self, name: str) -> JobStatus:
        client = self._connect(job=name)
        try:
            details = client.get_job_info(name)
        except RuntimeError as error:
            raise _not_found_or_unavailable(name, error) from None
        except OSError as error:
            raise self._unreachable(error) from None
        return self._status_of(details)

    def logs(self, name: str, tail: int | None = None) -> str:
        client = self._connect(job=name)
        try:
            text = client.get_job_logs(name)
        except RuntimeError as error:
            raise _not_found_or_unavailable(name, error) from None
        except OSError as error:
            raise self._unreachable(error) from None
        return log_tail(text, tail)

    def cancel(self, name: str, suspend: bool = False) -> JobStatus:
        if suspend:
            raise BadRequest("a local Ray job cannot be suspended, only stopped; drop --suspend")
        client = self._connect(job=name)
        try:
            client.stop_job(name)
        except RuntimeError as error:
            raise _not_found_or_unavailable(name, error) from None
        except OSError as error:
            raise self._unreachable(error) from None
        return self.status(name)

    def capacity(self) -> Capacity:
        """The CPUs and GPUs of the head's live nodes, as Ray's state API reports them; the head is started when
        none answers (what asks is about to launch on it)."""
        client = self._connect(start=True)
        try:
            response = client.get(NODES_ENDPOINT)
            nodes = response.json()["data"]["result"]["result"] if response.status_code == 200 else None
        except OSError as error:
            raise self._unreachable(error) from None
        except (ValueError, KeyError, TypeError):
            nodes = None
        if not isinstance(nodes, list):
            raise Unavailable(f"the local Ray dashboard at {self._url} did not list its nodes ({NODES_ENDPOINT})")
        alive = [node.get("resources_total", {}) for node in nodes if node.get("state") == "ALIVE"]
        return Capacity(
            cpus=sum(float(total.get("CPU", 0)) for total in alive),
            gpus=sum(float(total.get("GPU", 0)) for total in alive),
        )

    def observe(self, timeout_s: float | None = None) -> Iterator[JobStatus]:
        return poll_changes(self._managed_statuses, POLL_INTERVAL_S, timeout_s)

    def _managed_statuses(self) -> list[JobStatus]:
        client = self._connect()
        try:
            jobs = client.list_jobs()
        except RuntimeError as error:
            raise Unavailable(f"cannot list jobs on the local Ray head: {_first_line(error)}") from None
        except OSError as error:
            raise self._unreachable(error) from None
        return [self._status_of(job) for job in jobs if (job.metadata or {}).get(MANAGED_BY) == MANAGER]

    def _connect(self, start: bool = False, job: str | None = None) -> TimedJobSubmissionClient:
        """A client of this data directory's head, found again for each call (a head that died and was started
        again is on other ports, and its old port may be another head's now); only a launch starts one (a
        status query or a typo must not). `job`: the job asked about, named when no head answers."""
        url = ensure_head(self._settings) if start else find_head(self._settings)
        if url is None:
            runs = f"has no job {job!r}" if job else "runs no jobs"
            raise Unavailable(
                f"no local Ray head answers {head_location(self._settings)}, so it {runs}; "
                "`trainbot jobs` lists what was launched, and a launch starts the head"
            )
        if self._client is None or url != self._url:
            self._url = url
            from actions.jobs.backends.ray_jobs_client import TimedJobSubmissionClient  # noqa: PLC0415 - keeps `trainbot` start fast

            try:
                self._client = TimedJobSubmissionClient(url, self._timeout)
            except RuntimeError as error:
                raise Unavailable(f"cannot reach the local Ray dashboard at {url}: {_first_line(error)}") from None
            except OSError as error:
                raise self._unreachable(error) from None
        return self._client

    def _unreachable(self, error: OSError) -> Unavailable:
        """Requests' failures (refused, timed out) are OSErrors; Ray lets them through as they are."""
        return Unavailable(
            f"the local Ray dashboard at {self._url} cannot be reached "
            f"({failure_reason(error, self._timeout[1])}); `trainbot jobs` lists what was launched"
        )

    def _status_of(self, details: JobDetails) -> JobStatus:
        return JobStatus(
            name=details.submission_id or details.job_id or "",
            state=JobState(details.status.value),
            message=details.message or "",
            dashboard_url=self._url,
            submission_id=details.submission_id or "",
            start_time=_from_ms(details.start_time),
            end_time=_from_ms(details.end_time),
        )


def _from_ms(millis: int | None) -> datetime | None:
    return datetime.fromtimestamp(millis / 1000, tz=UTC) if millis else None


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def _not_found_or_unavailable(name: str, error: RuntimeError) -> NotFound | Unavailable:
    if NOT_FOUND.search(str(error)):
        return NotFound(f"no job {name!r} on the local Ray head; `trainbot jobs` lists the jobs trainbot launched")
    return Unavailable(f"the local Ray head did not answer for {name}: {_first_line(error)}")
