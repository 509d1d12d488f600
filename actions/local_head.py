"""The embedded Ray cluster: one head on 127.0.0.1, its files under the data directory.

`ensure_head` starts it when no dashboard answers on the configured port, and returns the
dashboard URL that Ray's JobSubmissionClient and the diagnosers' collectors use.
"""

from __future__ import annotations

import os
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
# Ray puts AF_UNIX sockets under TEMP/session_<date>_<pid>/sockets/; Linux caps such a path at 107 bytes.
MAX_TEMP_DIR_CHARS = 40


def dashboard_url(settings: Settings) -> str:
    return f"http://{HEAD_HOST}:{settings.local_dashboard_port}"


def head_running(url: str) -> bool:
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
        if head_running(url):
            return url
        time.sleep(0.5)
    raise Unavailable(f"the local Ray head started but its dashboard {url} did not answer; see {log}")


def stop_head() -> None:
    """Stop the Ray processes on this machine (Ray offers no per-head stop)."""
    subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"],
        capture_output=True,
        timeout=120,
        check=False,
    )
