"""The local backend's Ray session logs: the job's driver log, its workers' stdout/stderr, raylet.out.

Ray names a worker's files worker-<worker_id>-<job_id>-<pid>.out/.err, but workers it starts ahead of
any job carry the nil job id (ffffffff) in the name for life; once leased to a job, such a worker
writes a `:job_id:<hex>` line into both files. A file belongs to the job by either mark.

raylet.out is the node's, shared by every job the session ran: only its entries that name this job are
kept, so another job's memory kill is never quoted as this one's.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import requests

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, OK, BundleWriter, error_status
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.target import CollectConfig, Target

SOURCE = "logs"
# The memory monitor's kill reports (host-oom) are in raylet.out.
RAYLET_LOG = "raylet.out"
# A raylet entry starts with its `[2026-11-22 18:47:31,216 I ...]` stamp (or `[state-dump]`); the
# lines after it up to the next stamp (a kill report's details) belong to it.
ENTRY_START = re.compile(rb"^\[(?:\d{4}-\d\d-\d\d |state-dump\])")
# A kill report lists every worker it considered; only the selected ones were killed.
SELECTED_JOB = re.compile(rb"Selected to kill: \((?:Task|Actor\([0-9a-f]+\)): job ID=([0-9a-f]+)")
WORKER_LOG = re.compile(r"^worker-[0-9a-f]+-(?P<job>[0-9a-f]+)-\d+\.(?:out|err)$")
# The `:job_id:` mark is written when the worker is leased, after at most a few import warnings.
JOB_MARK_WINDOW = 64 << 10


def keep_tail(data: bytes, max_bytes: int) -> bytes:
    """The last `max_bytes` of a log, from a line start when one is inside: the end holds the failure."""
    if len(data) <= max_bytes:
        return data
    cut = len(data) - max_bytes
    if data[cut - 1 : cut] == b"\n":
        return data[cut:]
    newline = data.find(b"\n", cut)
    return data[newline + 1 :] if 0 <= newline < len(data) - 1 else data[cut:]


def collect_local_logs(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
    """Copy the job's driver and worker logs and raylet.out into logs/, names kept, each cut to its end."""
    if not target.session_dir:
        writer.source(SOURCE, NOT_CONFIGURED)
        return
    folder = Path(target.session_dir) / "logs"
    if not folder.is_dir():
        writer.source(SOURCE, error_status(f"no Ray session logs at {folder}"))
        return
    problems: list[str] = []
    driver = folder / f"job-driver-{target.submission_id}.log"
    if not driver.is_file():
        problems.append(f"no {driver.name} in {folder}")
    job_hex, lookup_problem = _job_hex(target, config, deadline)
    if lookup_problem:
        problems.append(f"worker logs not copied: {lookup_problem}")
    for path in [driver, *(_worker_logs(folder, job_hex) if job_hex else ())]:
        _copy_tail(path, config.log_max_bytes, writer)
    if job_hex and (entries := raylet_entries_of_job(folder / RAYLET_LOG, job_hex, config.log_max_bytes)):
        writer.write_bytes(f"logs/{RAYLET_LOG}", entries)
    writer.source(SOURCE, error_status("; ".join(problems)) if problems else OK)


def _job_hex(target: Target, config: CollectConfig, deadline: Deadline) -> tuple[str, str]:
    """(the job's Ray job id in hex, "") or ("", why not); ("", "") for a job whose driver never joined Ray.

    Only the dashboard maps a submission id to a job id; nothing in the session folder does.
    """
    if not target.dashboard_url:
        return "", "no dashboard URL to look up the job id"
    url = f"{target.dashboard_url.rstrip('/')}/api/jobs/{quote(target.submission_id, safe='')}"
    headers = {"Authorization": f"Bearer {config.dashboard_token}"} if config.dashboard_token else {}
    try:
        response = requests.get(url, headers=headers, timeout=deadline.timeout(config.request_timeout_s))
        response.raise_for_status()
        return str(response.json().get("job_id") or ""), ""
    except (requests.RequestException, ValueError, AttributeError) as error:
        return "", f"the dashboard gave no job id ({type(error).__name__})"


def _worker_logs(folder: Path, job_hex: str) -> list[Path]:
    mark = f":job_id:{job_hex}\n".encode()
    found = []
    for path in sorted(folder.glob("worker-*")):
        named = WORKER_LOG.match(path.name)
        if named and (named["job"] == job_hex or _starts_with_mark(path, mark)):
            found.append(path)
    return found


def raylet_entries_of_job(path: Path, job_hex: str, max_bytes: int) -> bytes:
    """The last `max_bytes` of raylet.out's entries that name the job: kill reports that selected its
    workers, and its own lines. Memory stays near twice `max_bytes` whatever the file's size."""
    named = re.compile(rb"\b[Jj]ob(?: ID=| )" + re.escape(job_hex.encode()) + rb"\b")
    kept = bytearray()
    entry: list[bytes] = []
    try:
        with path.open("rb") as stream:
            for line in stream:
                if ENTRY_START.match(line):
                    kept += _if_of_job(entry, job_hex, named)
                    entry = []
                    if len(kept) > 2 * max_bytes:
                        # keep_tail reads only the last max_bytes + 1 bytes, so the rest can go now.
                        del kept[: -(max_bytes + 1)]
                entry.append(line)
    except OSError:
        return b""
    kept += _if_of_job(entry, job_hex, named)
    return keep_tail(bytes(kept), max_bytes)


def _if_of_job(entry: list[bytes], job_hex: str, named: re.Pattern[bytes]) -> bytes:
    text = b"".join(entry)
    selected = SELECTED_JOB.findall(text)
    if selected:
        return text if job_hex.encode() in selected else b""
    return text if named.search(text) else b""


def _starts_with_mark(path: Path, mark: bytes) -> bool:
    try:
        with path.open("rb") as stream:
            return mark in stream.read(JOB_MARK_WINDOW)
    except OSError:
        return False


def _copy_tail(path: Path, max_bytes: int, writer: BundleWriter) -> None:
    """Copy the file's last `max_bytes`; empty or vanished files are skipped."""
    if data := read_tail(path, max_bytes):
        writer.write_bytes(f"logs/{path.name}", data)


def read_tail(path: Path, max_bytes: int) -> bytes:
    """The file's last `max_bytes` from a line start, without reading the rest (b"" if empty or gone)."""
    try:
        with path.open("rb") as stream:
            size = stream.seek(0, 2)
            # One byte more than kept, so keep_tail can tell whether the cut fell on a line start.
            stream.seek(max(0, size - max_bytes - 1))
            data = stream.read()
    except OSError:
        return b""
    return keep_tail(data, max_bytes)
