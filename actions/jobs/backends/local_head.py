"""The embedded Ray cluster: one head on 127.0.0.1, its files under the data directory.

`ensure_head` starts it when no dashboard answers on the configured port, and returns the
dashboard URL that Ray's JobSubmissionClient and the diagnosers' collectors use.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from actions.errors import Unavailable
from actions.settings import Settings

HEAD_HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
PROBE_TIMEOUT_S = 2.0
STOP_TIMEOUT_S = 10.0
# Ray puts AF_UNIX sockets under TEMP/session_<date>_<pid>/sockets/; Linux caps such a path at 107 bytes.
MAX_TEMP_DIR_CHARS = 40


def dashboard_url(settings: Settings) -> str:
    return f"http://{HEAD_HOST}:{settings.local_dashboard_port}"


def head_running(url: str) -> bool:
    """Whether a Ray dashboard answers at `url`; Unavailable when something there takes the connection and
    never answers (starting a head on its port would only wait for it)."""
    try:
        return _dashboard_answers(url)
    except TimeoutError:
        raise Unavailable(
            f"something at {url} accepts connections but did not answer as a Ray dashboard within "
            f"{PROBE_TIMEOUT_S:g} s; free the port or give trainbot another TRAINBOT_LOCAL_DASHBOARD_PORT"
        ) from None


def _dashboard_answers(url: str) -> bool:
    """True when the dashboard answers, False when nothing listens; TimeoutError when it stays silent."""
    try:
        with urllib.request.urlopen(f"{url}/api/version", timeout=PROBE_TIMEOUT_S) as response:
            return response.status == 200
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            raise Unavailable(
                f"a Ray head at {url} requires a token (Ray token auth); stop it with `ray stop`, or give "
                "trainbot another TRAINBOT_LOCAL_DASHBOARD_PORT and TRAINBOT_LOCAL_GCS_PORT"
            ) from None
        return False
    except urllib.error.URLError as error:
        # A connect that timed out comes wrapped; a read that timed out (below) does not.
        if isinstance(error.reason, TimeoutError):
            raise error.reason from None
        return False
    except TimeoutError:
        raise
    except OSError:
        return False


def temp_dir(settings: Settings) -> Path:
    return (settings.data_dir / "ray").resolve()


def ensure_head(settings: Settings) -> str:
    """The dashboard URL of a running local head, starting one when none answers."""
    url = dashboard_url(settings)
    if head_running(url):
        return url
    ray_dir = temp_dir(settings)
    if len(str(ray_dir)) > MAX_TEMP_DIR_CHARS:
        raise Unavailable(
            f"cannot start the local Ray head under {ray_dir}: Ray's socket paths would be too long; "
            f"set TRAINBOT_DATA_DIR to a path under {MAX_TEMP_DIR_CHARS - 4} characters"
        )
    ray_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
        "--node-ip-address", HEAD_HOST,
        "--port", str(settings.local_gcs_port),
        "--dashboard-host", HEAD_HOST,
        "--dashboard-port", str(settings.local_dashboard_port),
        "--temp-dir", str(ray_dir),
        # Ray's fixed defaults for these two (52365 and 10001) belong to whichever head started first on the
        # machine; a second head's job agent could not listen and every submission was refused with "No
        # available agent".
        "--dashboard-agent-listen-port", str(_free_port()),
        "--ray-client-server-port", str(_free_port()),
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
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        # A dashboard still starting may take the connection before it answers: that is not yet up.
        with contextlib.suppress(TimeoutError):
            if _dashboard_answers(url):
                return url
        time.sleep(0.5)
    raise Unavailable(f"the local Ray head started but its dashboard {url} did not answer; see {log}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HEAD_HOST, 0))
        return probe.getsockname()[1]


def stop_head(settings: Settings) -> None:
    """Stop this head: the processes started with its temp dir, and everything they started (workers, job
    drivers). `ray stop` would stop every Ray process on the machine, other people's heads too."""
    import psutil  # noqa: PLC0415 - only stopping needs it

    folder = str(temp_dir(settings))

    def of_this_head(args: list[str] | None) -> bool:
        return any(arg.endswith(folder) or f"{folder}{os.sep}" in arg for arg in args or ())

    heads = [each for each in psutil.process_iter(["cmdline"]) if of_this_head(each.info["cmdline"])]
    doomed: dict[int, psutil.Process] = {}
    for head in heads:
        try:
            doomed.update({each.pid: each for each in [head, *head.children(recursive=True)]})
        except psutil.NoSuchProcess:
            continue
    for each in doomed.values():
        with contextlib.suppress(psutil.NoSuchProcess):
            each.terminate()
    _, alive = psutil.wait_procs(list(doomed.values()), timeout=STOP_TIMEOUT_S)
    for each in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            each.kill()
