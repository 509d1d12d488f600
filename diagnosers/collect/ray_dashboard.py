"""The Ray dashboard (KubeRay head or local head): the jobs list, the node summary, the job's tasks and
its driver log (logs/job-driver-<id>.log), each saved as the dashboard answered it.

Plain HTTP with `requests`, never `ray`: the diagnosers stay importable where Ray is not installed,
and every request is bounded by the collection's deadline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import requests

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, OK, BundleWriter, error_status
from diagnosers.collect.collector import SourceUnavailable
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.local_logs import keep_tail
from diagnosers.collect.target import CollectConfig, Target

SOURCE = "ray"
# The state API's own cap is 10,000 (RAY_MAX_LIMIT_FROM_API_SERVER); one job's failure shows in far fewer.
TASKS_LIMIT = 1000
REFUSED = (401, 403)


class _Failed(Exception):
    """One request failed in a way the rest of the collection survives; the message names it."""


@dataclass
class _Dashboard:
    """One collection's requests to the dashboard, each bounded by the deadline."""

    url: str
    config: CollectConfig
    deadline: Deadline
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        if self.config.dashboard_token:
            # Ray >= 2.52 token auth reads `Authorization: Bearer <token>` (X-Ray-Authorization as fallback).
            self.session.headers["Authorization"] = f"Bearer {self.config.dashboard_token}"

    def get(self, path: str, params: dict[str, Any] | None = None) -> bytes:
        try:
            response = self.session.get(
                f"{self.url}{path}", params=params, timeout=self.deadline.timeout(self.config.request_timeout_s)
            )
        except (requests.ConnectionError, requests.Timeout) as error:
            raise SourceUnavailable(f"unreachable: {self.url}: {_reason(error)}") from None
        if response.status_code in REFUSED:
            verb = "check" if self.config.dashboard_token else "set"
            raise SourceUnavailable(
                error_status(
                    f"the Ray dashboard refused the request (HTTP {response.status_code}): "
                    f"{verb} TRAINBOT_RAY_DASHBOARD_TOKEN"
                )
            )
        if response.status_code != 200:
            raise _Failed(f"GET {path}: HTTP {response.status_code} {_first_line(response.text)}".rstrip())
        return response.content


def collect_dashboard(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
    """Save ray/jobs.json, ray/nodes.json, ray/tasks.json and the driver log; keep whatever answered."""
    if not target.dashboard_url:
        writer.source(SOURCE, NOT_CONFIGURED)
        return
    dashboard = _Dashboard(target.dashboard_url.rstrip("/"), config, deadline)
    with dashboard.session:
        failures = _collect(dashboard, target, config, writer)
    writer.source(SOURCE, error_status("; ".join(failures)) if failures else OK)


def _collect(dashboard: _Dashboard, target: Target, config: CollectConfig, writer: BundleWriter) -> list[str]:
    """The failures, in words; a dashboard that is down or refuses raises SourceUnavailable at the first request."""
    failures: list[str] = []
    job = _save_jobs(dashboard, target, writer, failures)
    _save(dashboard, "/nodes", {"view": "summary"}, "ray/nodes.json", writer, failures)
    if job is None:
        return failures
    # job_id is null until the entrypoint's driver connects to Ray; such a job has no tasks.
    if job.get("job_id"):
        params = {
            "limit": TASKS_LIMIT,
            "detail": "true",
            "filter_keys": "job_id",
            "filter_predicates": "=",
            "filter_values": job["job_id"],
            # The state API's own timeout, in whole seconds, so it gives up when we do.
            "timeout": max(1, int(config.request_timeout_s)),
        }
        _save(dashboard, "/api/v0/tasks", params, "ray/tasks.json", writer, failures)
    _save_driver_log(dashboard, str(job.get("submission_id") or ""), config, writer, failures)
    return failures


def _save_jobs(
    dashboard: _Dashboard, target: Target, writer: BundleWriter, failures: list[str]
) -> dict[str, Any] | None:
    """Save this job's entry of the jobs list (in the list's own shape) and return it (None when absent).

    Only this job: the rules read every entry's message, and another job's failure is not this one's.
    """
    try:
        raw = dashboard.get("/api/jobs/")
    except _Failed as error:
        failures.append(str(error))
        return None
    wanted = target.submission_id or target.job
    job = _find_job(raw, wanted)
    if job is None:
        failures.append(f"no job {wanted} on the dashboard")
    else:
        writer.write_json("ray/jobs.json", [job])
    return job


def _find_job(raw: bytes, wanted: str) -> dict[str, Any] | None:
    """The entry whose submission id (or, for a driver started by hand, job id) is `wanted`."""
    try:
        jobs = json.loads(raw)
    except ValueError:
        return None
    for job in jobs if isinstance(jobs, list) else []:
        if isinstance(job, dict) and wanted in (job.get("submission_id"), job.get("job_id")):
            return job
    return None


def _save(
    dashboard: _Dashboard,
    path: str,
    params: dict[str, Any],
    relative: str,
    writer: BundleWriter,
    failures: list[str],
) -> None:
    try:
        writer.write_bytes(relative, dashboard.get(path, params))
    except _Failed as error:
        failures.append(str(error))
    except SourceUnavailable as error:
        # The dashboard answered the jobs list, so a later outage is a partial failure, not a down service.
        failures.append(f"GET {path}: {error}")


def _save_driver_log(
    dashboard: _Dashboard, submission_id: str, config: CollectConfig, writer: BundleWriter, failures: list[str]
) -> None:
    # Jobs started by a hand-run driver (no submission id) have no log on the dashboard.
    if not submission_id:
        return
    path = f"/api/jobs/{quote(submission_id, safe='')}/logs"
    try:
        logs = json.loads(dashboard.get(path)).get("logs") or ""
    except _Failed as error:
        failures.append(str(error))
        return
    except SourceUnavailable as error:
        failures.append(f"GET {path}: {error}")
        return
    except (ValueError, AttributeError):
        failures.append(f"GET {path}: not the JSON {{'logs': ...}} Ray answers")
        return
    if logs:
        # Ray's own file name for it: the session folder's copy (local backend) lands on the same file.
        writer.write_bytes(driver_log_name(submission_id), keep_tail(logs.encode(), config.log_max_bytes))


def driver_log_name(submission_id: str) -> str:
    return f"logs/job-driver-{re.sub(r'[^A-Za-z0-9_.-]', '_', submission_id)}.log"


def _reason(error: requests.RequestException) -> str:
    """`Failed to establish a new connection: [Errno 111] Connection refused`, without urllib3's wrappers."""
    if isinstance(error, requests.Timeout):
        return "no answer within the request timeout"
    cause = getattr(error.args[0], "reason", error) if error.args else error
    return str(cause).split("): ", 1)[-1]


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:160] if lines else ""
