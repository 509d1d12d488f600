"""MLflow's webhooks end to end: a real `mlflow server` (sqlite backend, loopback) sends its registry events,
signed, to a real `trainbot serve`; trainbot offers new versions, explains its own alias moves and reports
the others as out-of-band."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from cryptography.fernet import Fernet
from mlflow import MlflowClient
from mlflow.webhooks.delivery import _generate_hmac_signature

from actions.promotions.policy import Actor
from actions.promotions.registry_events import Notice, NoticeKind, RegistryEvents
from actions.promotions.service import Promotions
from actions.settings import Settings
from bot.web.mlflow_webhook import DELIVERY_HEADER, MAX_BODY_BYTES, SIGNATURE_HEADER, TIMESTAMP_HEADER
from tests.integration.cli import trainbot
from tests.paths import TRAINBOT
from tests.servers.processes import free_port, serving

pytestmark = pytest.mark.integration

SECRET = "webhook-secret-for-the-test"
POLICY = {"targets": {"staging": {"approvers": ["U02B"]}}}
DELIVERY_TIMEOUT_S = 20


@pytest.fixture(scope="module")
def mlflow_url(tmp_path_factory: pytest.TempPathFactory, module_state_store_url: str) -> Iterator[str]:
    """A server per dialect of the state store: each run of the module registers its webhook afresh."""
    folder = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    env = {
        **os.environ,
        # The server's workers must share one key to read the webhook secrets they stored.
        "MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        # trainbot listens on plain http on loopback here; MLflow allows neither by default.
        "MLFLOW_WEBHOOK_ALLOWED_SCHEMES": "http,https",
        "MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS": "true",
        "MLFLOW_WEBHOOK_CACHE_TTL": "1",
    }
    command = [
        str(Path(sys.executable).with_name("mlflow")),
        "server",
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--default-artifact-root",
        str(folder / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    url = f"http://127.0.0.1:{port}"
    with serving(command, folder / "server.log", f"{url}/health", env):
        yield url


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, mlflow_url: str, module_state_store_url: str) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("trainbot")
    config = folder / "trainbot.yaml"
    config.write_text(json.dumps({"promotion": POLICY}))
    return {
        "TRAINBOT_CONFIG": str(config),
        "TRAINBOT_DATA_DIR": str(folder),
        "TRAINBOT_MLFLOW_TRACKING_URI": mlflow_url,
        "TRAINBOT_MLFLOW_WEBHOOK_SECRET": SECRET,
        "TRAINBOT_STATE_STORE_URL": module_state_store_url,
    }


@pytest.fixture(scope="module")
def webhook_settings(env: dict[str, str]) -> Settings:
    """What the module's `trainbot serve` reads from `env`, with MLflow's webhook secret and the policy."""
    return Settings(
        data_dir=Path(env["TRAINBOT_DATA_DIR"]),
        mlflow_tracking_uri=env["TRAINBOT_MLFLOW_TRACKING_URI"],
        mlflow_webhook_secret=SECRET,
        promotion=POLICY,
        state_store_url=env["TRAINBOT_STATE_STORE_URL"],
    )


@pytest.fixture(scope="module")
def trainbot_url(env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    log = Path(env["TRAINBOT_DATA_DIR"]) / "serve.log"
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    url = f"http://127.0.0.1:{port}"
    with serving([str(TRAINBOT), "serve", "--port", str(port)], log, f"{url}/healthz", {**clean, **env}):
        yield url


@pytest.fixture(scope="module")
def registered(env: dict[str, str], trainbot_url: str) -> str:
    """`trainbot model webhook URL` has pointed the MLflow server at trainbot serve."""
    hook = f"{trainbot_url}/webhooks/mlflow"
    assert trainbot(env, "model", "webhook", hook).stdout == f"created MLflow webhook 'trainbot' -> {hook}\n"
    assert trainbot(env, "model", "webhook", hook).stdout.startswith("updated MLflow webhook")
    return hook


@pytest.fixture
def model(mlflow_url: str, registered: str, request: pytest.FixtureRequest) -> str:
    name = request.node.name.replace("[", "-").replace("]", "")
    MlflowClient(mlflow_url).create_registered_model(name)
    return name


def register_version(mlflow_url: str, model: str) -> int:
    client = MlflowClient(mlflow_url)
    run = client.create_run("0")
    client.log_metric(run.info.run_id, "val_loss", 1.0)
    client.set_terminated(run.info.run_id)
    version = client.create_model_version(model, f"runs:/{run.info.run_id}/model", run_id=run.info.run_id)
    return int(version.version)


def eventually(condition: Callable[[], bool]) -> bool:
    """Whether `condition` comes true within DELIVERY_TIMEOUT_S (MLflow delivers from a thread pool)."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def notices_of(settings: Settings, model: str, count: int) -> list[Notice]:
    """The model's unposted notices, once `count` have arrived or the wait is over."""

    def found() -> list[Notice]:
        return [notice for notice in RegistryEvents(settings.state_url()).unposted() if notice.model == model]

    eventually(lambda: len(found()) >= count)
    return found()


def test_a_new_version_is_offered_for_promotion(webhook_settings, mlflow_url, model):
    version = register_version(mlflow_url, model)
    [offer] = notices_of(webhook_settings, model, 1)
    assert (offer.kind, offer.version) == (NoticeKind.OFFER, version)
    assert offer.text.endswith(f"To promote it (staging, production): trainbot model promote {model} {version} staging")


def test_trainbots_own_move_is_explained_and_a_hand_move_is_out_of_band(webhook_settings, mlflow_url, model):
    first, second = register_version(mlflow_url, model), register_version(mlflow_url, model)
    promotions = Promotions(webhook_settings)
    request = promotions.request(Actor("U01ALICE"), model, second, "staging")
    assert promotions.approve(Actor("U02B"), request.id).state.value == "approved"
    MlflowClient(mlflow_url).set_registered_model_alias(model, "staging", str(first))  # by hand
    MlflowClient(mlflow_url).delete_registered_model_alias(model, "staging")

    found = notices_of(webhook_settings, model, 4)
    assert sorted((notice.kind.value, str(notice.version)) for notice in found) == [
        ("offer", str(first)),
        ("offer", str(second)),
        ("out-of-band", str(first)),
        ("out-of-band", "None"),
    ]
    assert eventually(lambda: promotions.store.get(request.id).announced_at is not None)
    trail = [(event.event, str(event.version)) for event in promotions.history(model)]
    # MLflow delivers from a thread pool: the two may arrive in either order.
    assert sorted(trail[-2:]) == [("out-of-band", str(first)), ("out-of-band", "None")]


def post(trainbot_url: str, headers: dict[str, str], body: bytes) -> requests.Response:
    return requests.post(f"{trainbot_url}/webhooks/mlflow", data=body, headers=headers, timeout=10)


def signed(body: str, secret: str = SECRET, at: float | None = None) -> dict[str, str]:
    delivery, timestamp = str(uuid.uuid4()), str(int(time.time() if at is None else at))
    return {
        DELIVERY_HEADER: delivery,
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: _generate_hmac_signature(secret, delivery, timestamp, body),
        "Content-Type": "application/json",
    }


CREATED = json.dumps({"entity": "model_version", "action": "created", "data": {"name": "posted", "version": "7"}})


def test_the_endpoint_refuses_what_mlflow_did_not_sign_and_handles_a_delivery_once(trainbot_url, webhook_settings):
    before = len(RegistryEvents(webhook_settings.state_url()).unposted())
    refused = [
        post(trainbot_url, {}, CREATED.encode()),
        post(trainbot_url, signed(CREATED, secret="wrong"), CREATED.encode()),
        post(trainbot_url, signed(CREATED, at=time.time() - 3600), CREATED.encode()),
    ]
    assert [answer.status_code for answer in refused] == [401, 401, 401]
    assert "not a signed MLflow delivery" in refused[0].json()["error"]
    assert "TRAINBOT_MLFLOW_WEBHOOK_SECRET" in refused[1].json()["error"]
    assert "a replay" in refused[2].json()["error"]

    headers = signed(CREATED)
    first, again = post(trainbot_url, headers, CREATED.encode()), post(trainbot_url, headers, CREATED.encode())
    assert (first.status_code, first.json()["duplicate"], len(first.json()["notices"])) == (200, False, 1)
    assert (again.status_code, again.json()) == (200, {**first.json(), "duplicate": True, "notices": []})
    assert len(RegistryEvents(webhook_settings.state_url()).unposted()) == before + 1


def test_the_endpoint_answers_bad_input_with_its_status(trainbot_url):
    not_json = "{nope"
    assert post(trainbot_url, signed(not_json), not_json.encode()).status_code == 400
    huge = "x" * (MAX_BODY_BYTES + 1)
    too_large = post(trainbot_url, signed(huge), huge.encode())
    assert (too_large.status_code, too_large.json()["error"]) == (
        413,
        f"the body is {MAX_BODY_BYTES + 1} bytes; at most {MAX_BODY_BYTES} are taken",
    )
    assert requests.get(f"{trainbot_url}/webhooks/mlflow", timeout=10).status_code == 405
    assert requests.get(f"{trainbot_url}/nowhere", timeout=10).status_code == 404
    assert requests.get(f"{trainbot_url}/healthz", timeout=10).json() == {"ok": True}


def test_registering_needs_a_server_and_a_secret(env, tmp_path):
    sqlite = {**env, "TRAINBOT_MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    no_server = trainbot(sqlite, "model", "webhook", "http://127.0.0.1:9/webhooks/mlflow", check=False)
    assert (no_server.returncode, no_server.stderr.strip()) == (
        2,
        f"trainbot: only an MLflow server sends webhooks, and TRAINBOT_MLFLOW_TRACKING_URI is "
        f"{sqlite['TRAINBOT_MLFLOW_TRACKING_URI']}; point it at the server (http://HOST:5000)",
    )
    no_secret = trainbot({**env, "TRAINBOT_MLFLOW_WEBHOOK_SECRET": ""}, "model", "webhook", "http://h/x", check=False)
    assert no_secret.returncode == 2
    assert "set TRAINBOT_MLFLOW_WEBHOOK_SECRET first" in no_secret.stderr


def test_serving_loads_neither_torch_nor_ray_train():
    code = (
        "import sys; import bot.web.app, bot.slack.app, actions.promotions.service, actions.jobs.service; "
        "from mlflow import MlflowClient; "
        "heavy = [m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith(('ray.train', 'ray.tune'))]; "
        "assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
