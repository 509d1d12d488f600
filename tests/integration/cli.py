"""The real `trainbot` console script, run against the session's Ray head (see conftest.ray_env)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.paths import TRAINBOT

FINISH_TIMEOUT_S = 300


def trainbot(ray_env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    result = subprocess.run(
        [str(TRAINBOT), *args], capture_output=True, text=True, timeout=300, env={**clean, **ray_env}, check=False
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def launch(ray_env: dict[str, str], *args: str) -> str:
    return json.loads(trainbot(ray_env, *args, "-o", "json").stdout)["name"]


def wait_for(ray_env: dict[str, str], job: str, states: set[str], timeout_s: float = FINISH_TIMEOUT_S) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = json.loads(trainbot(ray_env, "status", job, "-o", "json").stdout)
        if status["state"] in states:
            return status
        time.sleep(2)
    logs = trainbot(ray_env, "logs", job, "--tail", "40", check=False).stdout
    pytest.fail(f"{job} did not reach {states} in {timeout_s} s; last state {status['state']}\n{logs}")
