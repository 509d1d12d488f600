"""The embedded Ray cluster: one head on 127.0.0.1 that belongs to the data directory that started it.

The head is started on free ports, and its record (<data_dir>/ray/head.json: the ports and the Ray session
name) is how trainbot finds it again: a dashboard on the recorded port is used only when it reports the
recorded session, so another checkout's head, or one that took over the port of a head that died, is never
used. An address set explicitly (TRAINBOT_RAY_DASHBOARD_URL, or TRAINBOT_LOCAL_DASHBOARD_PORT) wins over the
record. `ensure_head` finds or starts the head; `find_head` is the one answer to "where is the dashboard"
for every reader (submission, status, logs, the collectors); `stop_head` stops this head and nothing else.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from actions.errors import Unavailable
from actions.settings import Settings

HEAD_HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
PROBE_TIMEOUT_S = 2.0
STOP_TIMEOUT_S = 10.0
# Ray puts AF_UNIX sockets under TEMP/session_<date>_<pid>/sockets/; Linux caps such a path at 107 bytes.
MAX_TEMP_DIR_CHARS = 40
RECORD_NAME = "head.json"
GCS_SERVER = "gcs_server"


@dataclass(frozen=True)
class HeadRecord:
    """What this data directory's head was started with, and the Ray session that proves a dashboard is it."""

    dashboard_port: int
    gcs_port: int
    client_port: int
    session_name: str
    temp_dir: str

    @property
    def dashboard_url(self) -> str:
        return f"http://{HEAD_HOST}:{self.dashboard_port}"


def explicit_url(settings: Settings) -> str | None:
    """The dashboard the settings name (TRAINBOT_RAY_DASHBOARD_URL, or a local dashboard port), if any."""
    if settings.ray_dashboard_url:
        return settings.ray_dashboard_url.rstrip("/")
    if settings.local_dashboard_port:
        return f"http://{HEAD_HOST}:{settings.local_dashboard_port}"
    return None


def dashboard_url(settings: Settings) -> str:
    """Where this data directory's head is said to be (set explicitly, else recorded), not checked; "" if
    nowhere. To use a head, `find_head`."""
    explicit = explicit_url(settings)
    if explicit:
        return explicit
    record = read_record(settings)
    return record.dashboard_url if record else ""


def gcs_address(settings: Settings) -> str | None:
    """The GCS address of the head this data directory started, for its jobs' processes; None for a head set
    explicitly or none yet."""
    record = None if explicit_url(settings) else read_record(settings)
    return f"{HEAD_HOST}:{record.gcs_port}" if record else None


def head_location(settings: Settings) -> str:
    """The head in words, for a message: its explicit address, or the data directory it belongs to."""
    explicit = explicit_url(settings)
    return f"at {explicit}" if explicit else f"for the data directory {settings.data_dir}"


def find_head(settings: Settings) -> str | None:
    """The dashboard URL of the head this data directory's jobs go to, when it answers as that head.

    Explicit: whatever Ray head answers there. Otherwise the recorded head, and only while its dashboard
    reports the recorded session: a head on that port started by anyone else is not this one.
    """
    explicit = explicit_url(settings)
    if explicit:
        return explicit if head_running(explicit) else None
    record = read_record(settings)
    try:
        return record.dashboard_url if record and _answers_as(record) else None
    except TimeoutError:  # a head too busy to answer, or something else holding the port: not usable now
        return None


def _answers_as(record: HeadRecord) -> bool:
    """Whether the recorded head answers as itself; TimeoutError when something on its port stays silent."""
    return _session_at(record.dashboard_url) == record.session_name


def head_running(url: str) -> bool:
    """Whether a Ray dashboard answers at `url`; Unavailable when something there takes the connection and
    never answers (starting a head on its port would only wait for it)."""
    try:
        return _session_at(url) is not None
    except TimeoutError:
        raise Unavailable(
            f"something at {url} accepts connections but did not answer as a Ray dashboard within "
            f"{PROBE_TIMEOUT_S:g} s; free the port, or unset TRAINBOT_LOCAL_DASHBOARD_PORT and "
            "TRAINBOT_RAY_DASHBOARD_URL to let trainbot start its own head on free ports"
        ) from None


def _session_at(url: str) -> str | None:
    """The Ray session name the dashboard at `url` reports; None when nothing (or not a Ray dashboard)
    answers there; TimeoutError when something takes the connection and stays silent."""
    try:
        with urllib.request.urlopen(f"{url}/api/version", timeout=PROBE_TIMEOUT_S) as response:
            answer = json.loads(response.read(64 * 1024))
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            raise Unavailable(
                f"a Ray head at {url} requires a token (Ray token auth); trainbot's jobs cannot use it: unset "
                "TRAINBOT_LOCAL_DASHBOARD_PORT and TRAINBOT_RAY_DASHBOARD_URL to let trainbot start its own head"
            ) from None
        return None
    except urllib.error.URLError as error:
        # A connect that timed out comes wrapped; a read that timed out (below) does not.
        if isinstance(error.reason, TimeoutError):
            raise error.reason from None
        return None
    except TimeoutError:
        raise
    except (OSError, ValueError):  # refused, reset, or an answer that is not a dashboard's JSON
        return None
    session = answer.get("session_name") if isinstance(answer, dict) else None
    return session if isinstance(session, str) and session else None


def temp_dir(settings: Settings) -> Path:
    """Ray's temp dir for this data directory's head: <data_dir>/ray, or where that path is too long for
    Ray's socket paths, a short folder of the system's temp dir named after the data directory."""
    beside = (settings.data_dir / "ray").resolve()
    if len(str(beside)) <= MAX_TEMP_DIR_CHARS:
        return beside
    digest = hashlib.sha256(str(settings.data_dir.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()).resolve() / f"trainbot-{digest}"


def record_path(settings: Settings) -> Path:
    return settings.data_dir / "ray" / RECORD_NAME


def read_record(settings: Settings) -> HeadRecord | None:
    """This data directory's head record; None when there is none or it cannot be read as one."""
    try:
        return HeadRecord(**json.loads(record_path(settings).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def ensure_head(settings: Settings) -> str:
    """The dashboard URL of this data directory's running head, starting one when none answers."""
    explicit = explicit_url(settings)
    if explicit:
        if head_running(explicit):
            return explicit
        if settings.ray_dashboard_url:
            raise Unavailable(
                f"no Ray head answers at {explicit} (TRAINBOT_RAY_DASHBOARD_URL); start that head, or unset "
                "the setting to let trainbot start its own"
            )
        ports = (settings.local_dashboard_port or 0, settings.local_gcs_port or _free_ports(1)[0])
        return _start(settings, *ports).dashboard_url
    # Two launches at once from one data directory start one head between them.
    with _locked(settings):
        record = read_record(settings)
        if record is not None:
            try:
                if _answers_as(record):
                    return record.dashboard_url
            except TimeoutError:
                # Maybe this head, busy: starting another would stop it and its jobs.
                raise Unavailable(
                    f"this data directory's Ray head at {record.dashboard_url} did not answer within "
                    f"{PROBE_TIMEOUT_S:g} s; try again, or `trainbot stop` it and launch again"
                ) from None
        # What is left of a head of this data directory that died in part (its dashboard) would hold the
        # session folder's files and the CPUs.
        stop_head(settings)
        return _start(settings, *_free_ports(2)).dashboard_url


@contextlib.contextmanager
def _locked(settings: Settings) -> Iterator[None]:
    """Held while this data directory's head is looked for and started: one start at a time."""
    folder = settings.private_data_dir() / "ray"
    folder.mkdir(mode=0o700, exist_ok=True)
    with (folder / "head.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _start(settings: Settings, dashboard_port: int, gcs_port: int) -> HeadRecord:
    """Start the head on these ports in this data directory's temp dir, record it, and wait for its dashboard."""
    ray_dir = _private_temp_dir(settings)
    client_port, agent_port = _free_ports(2)
    command = [
        sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
        "--node-ip-address", HEAD_HOST,
        "--port", str(gcs_port),
        "--dashboard-host", HEAD_HOST,
        "--dashboard-port", str(dashboard_port),
        "--temp-dir", str(ray_dir),
        # Ray's fixed defaults for these two (52365 and 10001) belong to whichever head started first on the
        # machine; a second head's job agent could not listen and every submission was refused with "No
        # available agent".
        "--dashboard-agent-listen-port", str(agent_port),
        "--ray-client-server-port", str(client_port),
        "--disable-usage-stats",
    ]  # fmt: skip
    if settings.local_num_cpus:
        command += ["--num-cpus", str(settings.local_num_cpus)]
    # Job entrypoints say `python`: put this interpreter's bin first so they run where trainbot's
    # workloads and torch are installed, not in whatever `python` the shell would find.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # Ray turns token auth on by itself once ~/.ray/auth_token exists (any earlier ray.init writes it);
    # this head listens on loopback only, and its clients (our CLI, the collectors) send no token.
    env = {**os.environ, "PATH": path, "RAY_AUTH_MODE": "disabled"}
    log = ray_dir / "head-start.log"
    with log.open("w", encoding="utf-8") as out:
        started = subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=START_TIMEOUT_S, check=False
        )
    if started.returncode != 0:
        raise Unavailable(f"could not start the local Ray head (exit {started.returncode}); see {log}")
    record = HeadRecord(
        dashboard_port=dashboard_port,
        gcs_port=gcs_port,
        client_port=client_port,
        # `ray start` points session_latest at the session it just made; only this data directory's heads
        # use this temp dir.
        session_name=(ray_dir / "session_latest").resolve().name,
        temp_dir=str(ray_dir),
    )
    _write_record(settings, record)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        # A dashboard still starting may take the connection before it answers: that is not yet up.
        with contextlib.suppress(TimeoutError):
            if _session_at(record.dashboard_url) == record.session_name:
                return record
        time.sleep(0.5)
    raise Unavailable(f"the local Ray head started but its dashboard {record.dashboard_url} did not answer; see {log}")


def _private_temp_dir(settings: Settings) -> Path:
    """The temp dir, made 0700 and checked to be ours (a short one in /tmp could be made by anyone first)."""
    ray_dir = temp_dir(settings)
    if len(str(ray_dir)) > MAX_TEMP_DIR_CHARS:
        raise Unavailable(
            f"cannot start the local Ray head under {ray_dir}: Ray's socket paths would be too long; "
            f"set TMPDIR to a path under {MAX_TEMP_DIR_CHARS - 22} characters"
        )
    ray_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if ray_dir.stat().st_uid != os.getuid():
        raise Unavailable(f"{ray_dir}, the local Ray head's temp dir, belongs to another user; remove it")
    return ray_dir


def _write_record(settings: Settings, record: HeadRecord) -> None:
    path = record_path(settings)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(asdict(record), indent=2), encoding="utf-8")
    partial.replace(path)


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports free now (held together while chosen, so none repeats)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((HEAD_HOST, 0))
        return [probe.getsockname()[1] for probe in probes]


def stop_head(settings: Settings) -> int:
    """Stop this data directory's head: every process started with its temp dir or writing into it (Ray's
    client server names neither in its arguments, only its logs), and everything they started (workers, job
    drivers); forget its record. The number of processes stopped. `ray stop` would stop every Ray process on
    the machine, other people's heads too."""
    import psutil  # noqa: PLC0415 - only stopping needs it

    record = read_record(settings)
    # The temp dir it was started in (TMPDIR may differ now, and with it a short temp dir's place).
    folder = record.temp_dir if record else str(temp_dir(settings))
    sessions = f"{folder}{os.sep}session_"

    def under_folder(path: str) -> bool:
        return path.endswith(folder) or f"{folder}{os.sep}" in path

    def of_this_head(process: psutil.Process) -> bool:
        args = process.info["cmdline"] or []
        if any(under_folder(arg) for arg in args):
            return True
        if not any("ray" in arg for arg in args):
            return False
        # Files in the head's sessions (its logs), not the folder's own (the start lock a launch holds).
        with contextlib.suppress(psutil.Error):
            return any(each.path.startswith(sessions) for each in process.open_files())
        return False

    def is_gcs(process: psutil.Process) -> bool:
        with contextlib.suppress(psutil.Error):
            return process.name() == GCS_SERVER
        return False

    # Never this process, whatever its arguments name.
    heads = [each for each in psutil.process_iter(["cmdline"]) if each.pid != os.getpid() and of_this_head(each)]
    doomed: dict[int, psutil.Process] = {}
    for head in heads:
        try:
            doomed.update({each.pid: each for each in [head, *head.children(recursive=True)]})
        except psutil.NoSuchProcess:
            continue
    # The GCS server last: while it answers the others exit within about 2 s; once it is gone they wait for it
    # until killed (all at once, `trainbot stop` took the whole STOP_TIMEOUT_S).
    gcs = [each for each in doomed.values() if is_gcs(each)]
    for wave in ([each for each in doomed.values() if each not in gcs], gcs):
        for each in wave:
            with contextlib.suppress(psutil.NoSuchProcess):
                each.terminate()
        _, alive = psutil.wait_procs(wave, timeout=STOP_TIMEOUT_S)
        for each in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                each.kill()
    record_path(settings).unlink(missing_ok=True)
    return len(doomed)
