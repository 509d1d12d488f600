"""Nothing hangs: each service trainbot calls, played by a socket that accepts and never answers, and the
real `trainbot` command a person runs. One line naming the service (its URL without credentials) comes
back within 10 s, where before the command waited minutes or forever."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient

from tests.builders.model_registry import register
from tests.paths import TRAINBOT
from tests.servers.processes import free_port
from tests.standins.silent_server import HOST, silent_server

pytestmark = pytest.mark.integration

HEARD_WITHIN_S = 10.0
# Past this the command is killed and the test fails: long enough to tell "late" from "forever".
KILLED_AFTER_S = 60


@pytest.fixture
def silent_port() -> Iterator[int]:
    with silent_server() as port:
        yield port


def run_trainbot(tmp_path: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """`trainbot ARGS` with its data in tmp_path/data, only these `settings` and no MLflow variables."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("TRAINBOT_", "MLFLOW_"))}
    env = {**clean, "TRAINBOT_DATA_DIR": str(tmp_path / "data"), **settings}
    return subprocess.run(
        [str(TRAINBOT), *args], capture_output=True, text=True, timeout=KILLED_AFTER_S, env=env, check=False
    )


def said(tmp_path: Path, *args: str, **settings: str) -> tuple[str, float]:
    """What `trainbot ARGS` printed to stderr (it must fail, printing nothing else), and how long it took."""
    began = time.monotonic()
    result = run_trainbot(tmp_path, *args, **settings)
    took = time.monotonic() - began
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip(), took


def test_promote_names_a_silent_mlflow_within_10_s(tmp_path, silent_port):
    uri = f"http://alice:s3cret@{HOST}:{silent_port}/?token=t0ken"
    line, took = said(tmp_path, "model", "promote", "m", "1", "staging", TRAINBOT_MLFLOW_TRACKING_URI=uri)

    assert line.startswith(f"trainbot: MLflow at http://{HOST}:{silent_port}/ cannot be reached (no answer within 2 s)")
    assert "s3cret" not in line and "t0ken" not in line and "alice" not in line
    assert took < HEARD_WITHIN_S


def test_promote_names_a_closed_mlflow_port_at_once(tmp_path):
    """MLflow's own defaults (7 retries, backoff factor 2) answered this after 248 s."""
    url = f"http://{HOST}:{free_port()}"
    line, took = said(tmp_path, "model", "promote", "m", "1", "staging", TRAINBOT_MLFLOW_TRACKING_URI=url)

    assert line.startswith(f"trainbot: MLflow at {url} cannot be reached (Connection refused)")
    assert took < HEARD_WITHIN_S


@pytest.mark.parametrize(
    ("args", "settings"),
    [
        (("model", "rollback", "m", "staging"), {}),
        (("model", "webhook", "http://trainbot:8080/webhooks/mlflow"), {"TRAINBOT_MLFLOW_WEBHOOK_SECRET": "s"}),
    ],
)
def test_every_model_command_that_asks_mlflow_names_a_silent_one_within_10_s(tmp_path, silent_port, args, settings):
    uri = f"http://{HOST}:{silent_port}"
    line, took = said(tmp_path, *args, TRAINBOT_MLFLOW_TRACKING_URI=uri, **settings)

    assert line == (
        f"trainbot: MLflow at {uri} cannot be reached (no answer within 2 s); "
        "check that it is up and that TRAINBOT_MLFLOW_TRACKING_URI names it"
    )
    assert took < HEARD_WITHIN_S


def test_the_approval_that_moves_the_alias_names_a_silent_mlflow_within_10_s(tmp_path, silent_port):
    """Before: the move waited out MLflow's timeout and retries, then recording the failure in its tags did again
    (9.5 s), two lines, exit 0 though nothing moved."""
    config = tmp_path / "config.yaml"
    config.write_text("promotion: {targets: {staging: {approvers: [bob]}}}\n")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    mlflow_uri = f"sqlite:///{data / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=mlflow_uri, registry_uri=mlflow_uri)
    client.create_experiment("sweeps", artifact_location=str(tmp_path / "artifacts"))
    client.create_registered_model("m")
    register(client, "m", {"val_loss": 1.0})
    asked = run_trainbot(tmp_path, "model", "promote", "m", "1", "staging", "--as", "alice", "-o", "json",
                         TRAINBOT_CONFIG=str(config))  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    request = json.loads(asked.stdout)["id"]

    uri = f"http://{HOST}:{silent_port}"
    began = time.monotonic()
    approved = run_trainbot(tmp_path, "model", "approve", request, "--as", "bob",
                            TRAINBOT_CONFIG=str(config), TRAINBOT_MLFLOW_TRACKING_URI=uri)  # fmt: skip
    took = time.monotonic() - began

    assert approved.returncode == 1
    assert approved.stderr == ""
    assert approved.stdout.strip() == (
        f"{request}  m v1 -> staging  failed: MLflow at {uri} cannot be reached (no answer within 2 s); check that it "
        "is up and that TRAINBOT_MLFLOW_TRACKING_URI names it  (1/1 approvals by bob; asked by alice)"
    )
    assert took < HEARD_WITHIN_S


def test_jobs_names_a_silent_postgresql_within_10_s(tmp_path, silent_port):
    url = f"postgresql+psycopg://trainbot:s3cret@{HOST}:{silent_port}/trainbot"
    line, took = said(tmp_path, "jobs", TRAINBOT_STATE_STORE_URL=url)

    assert line.startswith(
        f"trainbot: PostgreSQL at postgresql+psycopg://{HOST}:{silent_port}/trainbot cannot be reached "
        "(no answer within 3 s)"
    )
    assert "s3cret" not in line
    assert took < HEARD_WITHIN_S


@pytest.mark.parametrize("args", [("status", "some-job"), ("launch", "tiny-transformer", "epochs=1")])
def test_the_local_backend_names_a_silent_dashboard_within_10_s(tmp_path, silent_port, args):
    """A launch must not start a head on the port something silent holds, and a status must not wait on it."""
    line, took = said(tmp_path, *args, TRAINBOT_LOCAL_DASHBOARD_PORT=str(silent_port))

    assert line.startswith(
        f"trainbot: something at http://{HOST}:{silent_port} accepts connections but did not answer as a Ray "
        "dashboard within 2 s"
    )
    assert took < HEARD_WITHIN_S
    assert not (tmp_path / "data" / "ray").exists()


@pytest.mark.parametrize("args", [("status", "some-job"), ("launch", "tiny-transformer", "epochs=1")])
def test_the_kuberay_backend_names_a_silent_api_server_within_10_s(tmp_path, silent_port, args):
    """urllib3 retried each timed-out read 3 times, each after 30 s: two minutes before a word."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: silent, cluster: {{server: "http://{HOST}:{silent_port}"}}}}]
users: [{{name: silent, user: {{token: s3cret}}}}]
contexts: [{{name: silent, context: {{cluster: silent, user: silent}}}}]
current-context: silent
"""
    )
    line, took = said(tmp_path, *args, TRAINBOT_BACKEND="kuberay", KUBECONFIG=str(kubeconfig))

    assert line.startswith(
        f"trainbot: cannot reach the Kubernetes API server at http://{HOST}:{silent_port} (no answer within 6 s)"
    )
    assert took < HEARD_WITHIN_S
