"""A running `trainbot serve` finishes an alias move whose mover was killed (-9) once its lease runs out:
the request does not wait for the next CLI command or restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from actions.promotions.policy import Actor
from actions.promotions.service import Promotions
from actions.promotions.store import PromotionState, PromotionStore
from actions.settings import Settings
from tests.paths import TRAINBOT
from tests.servers.processes import free_port, serving

POLICY = {"targets": {"staging": {"approvers": ["U02B"], "approvals": 1}}}
# Long enough that the mover, loading MLflow on a loaded machine, still holds its lease when it moves the alias
# (else the bot's sweeper rightly takes the move over and the "after" mover never reaches move_alias).
LEASE_S, SWEEP_S = 8.0, 0.3
FINISHED_WITHIN_S = 30

KILLED_WHILE_MOVING = """
import os, signal, sys
from actions.promotions.policy import Actor
from actions.promotions.service import Promotions
from actions.promotions.registry import Registry
from actions.settings import Settings

class KilledMidMove(Registry):
    def move_alias(self, model, alias, version):
        if sys.argv[3] == "after":
            super().move_alias(model, alias, version)
        os.kill(os.getpid(), signal.SIGKILL)  # the approval and the claim are recorded, the move is not

settings = Settings.model_validate_json(sys.argv[1])
Promotions(settings, registry=KilledMidMove(settings.tracking_uri())).approve(Actor("U02B"), sys.argv[2])
"""


def registered(uri: str, model: str) -> MlflowClient:
    """`model` with v1 and v2 (finished runs), staging at v1."""
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = client.create_experiment("sweeps")
    client.create_registered_model(model)
    for _ in range(2):
        run = client.create_run(experiment)
        client.set_terminated(run.info.run_id)
        client.create_model_version(model, source=f"runs:/{run.info.run_id}/model", run_id=run.info.run_id)
    client.set_registered_model_alias(model, "staging", "1")
    return client


@pytest.mark.parametrize("killed", ["before", "after"])
def test_a_running_bot_finishes_the_move_of_a_killed_mover(tmp_path: Path, state_store_url: str, killed: str):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = registered(uri, "tiny")
    settings = Settings(
        data_dir=tmp_path / "data",
        state_store_url=state_store_url,
        mlflow_tracking_uri=uri,
        promotion=POLICY,
        promotion_lease_s=LEASE_S,
    )
    request = Promotions(settings).request(Actor("U01ALICE"), "tiny", 2, "staging")

    config = tmp_path / "trainbot.yaml"
    config.write_text(yaml.safe_dump({"promotion": POLICY}))
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("TRAINBOT_", "SLACK_"))}
    env = {**clean, "TRAINBOT_CONFIG": str(config), "TRAINBOT_DATA_DIR": str(settings.data_dir),
           "TRAINBOT_STATE_STORE_URL": state_store_url, "TRAINBOT_MLFLOW_TRACKING_URI": uri,
           "TRAINBOT_PROMOTION_SWEEP_S": str(SWEEP_S)}  # fmt: skip
    port = free_port()
    url = f"http://127.0.0.1:{port}/healthz"
    with serving([str(TRAINBOT), "serve", "--port", str(port)], tmp_path / "serve.log", url, env):
        mover = subprocess.run(
            [sys.executable, "-c", KILLED_WHILE_MOVING, settings.model_dump_json(), request.id, killed],
            timeout=120, check=False,
        )  # fmt: skip
        assert mover.returncode == -signal.SIGKILL
        store = Promotions(settings).store
        deadline = time.monotonic() + FINISHED_WITHIN_S
        while (state := store.get(request.id).state) == PromotionState.APPROVING and time.monotonic() < deadline:
            time.sleep(0.2)
    assert state == PromotionState.APPROVED, (tmp_path / "serve.log").read_text()[-3000:]
    assert client.get_registered_model("tiny").aliases == {"staging": 2}
    assert [event.actor for event in Promotions(settings).history("tiny") if event.actor == "trainbot"] == ["trainbot"]


def test_the_approval_that_completes_the_count_holds_the_move_so_no_sweeper_takes_it(state_store_url: str):
    # A running bot's sweeper finishes moves nobody holds; between an approval and its approver's move there is
    # no moment when the move is free, so the approver moves the alias itself (a killed one leaves it to the lease).
    store = PromotionStore(state_store_url)
    store.create_schema()
    now = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    request = store.create(
        model="tiny",
        version=2,
        target="staging",
        kind="promote",
        requester="U01ALICE",
        approvals_needed=1,
        expires_in=timedelta(hours=1),
        at=now,
    )
    assert store.approve(request.id, "U02B", now, lambda _: None, lease=timedelta(seconds=30)).completed
    assert store.outbox(now + timedelta(seconds=1)) == []
    assert store.outbox(now + timedelta(seconds=31)) == [request.id]
