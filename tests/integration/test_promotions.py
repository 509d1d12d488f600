"""Promotions against a real MLflow registry (the sqlite store) and one state database shared by
threads and processes: policy, lifecycle, the audit trail in tags, and exactly one alias move."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from mlflow import MlflowClient

from actions.errors import BadRequest, Conflict, Forbidden, Unavailable
from actions.promotions.policy import Actor
from actions.promotions.registry import Registry
from actions.promotions.service import APPLY_LEASE, Promotions
from actions.promotions.store import PromotionState, now
from actions.settings import Settings
from tests.builders.model_registry import alias, register
from tests.integration.cli import trainbot

pytestmark = pytest.mark.integration

ALICE, BOB, CAROL, DAVE = Actor("U01ALICE"), Actor("U02B"), Actor("U03C"), Actor("U04D")
LEAD = Actor("U05LEAD", frozenset({"S0MLLEADS"}))
POLICY = {
    "targets": {
        "staging": {"approvers": ["U02B", "U03C", "U04D"], "approvals": 1},
        "production": {"approvers": ["U02B", "U03C"], "approver_groups": ["S0MLLEADS"], "checks": ["val_loss < 2.0"]},
        "champion": {"approvers": ["U02B"], "beats_current": {"metric": "val_loss", "mode": "min"}, "expires": "1h"},
    }
}


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    MlflowClient(tracking_uri=uri, registry_uri=uri).create_experiment("sweeps", artifact_location=str(folder / "art"))
    return uri


@pytest.fixture
def promotion_settings(tmp_path: Path, mlflow_uri: str, state_store_url: str) -> Settings:
    """The promotion policy on the module's MLflow registry, no Slack, on each dialect."""
    return Settings(
        data_dir=tmp_path, mlflow_tracking_uri=mlflow_uri, promotion=POLICY, state_store_url=state_store_url
    )


@pytest.fixture
def client(mlflow_uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=mlflow_uri, registry_uri=mlflow_uri)


@pytest.fixture
def model(client: MlflowClient, request: pytest.FixtureRequest) -> str:
    """A registered model named after the test, with v1 (val_loss 1.5) and v2 (val_loss 1.2)."""
    name = request.node.name.replace("[", "-").replace("]", "")
    client.create_registered_model(name)
    for loss in (1.5, 1.2):
        register(client, name, {"val_loss": loss})
    return name


class CountingRegistry(Registry):
    """The real registry, counting alias moves (thread-safe)."""

    def __init__(self, tracking_uri: str) -> None:
        super().__init__(tracking_uri)
        self.moves: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()

    def move_alias(self, model: str, alias: str, version: int) -> None:
        super().move_alias(model, alias, version)
        with self._lock:
            self.moves.append((model, alias, version))


class DownRegistry(Registry):
    """The real registry whose alias moves fail, as when the MLflow server is down."""

    def move_alias(self, model: str, alias: str, version: int) -> None:
        raise Unavailable("MLflow at http://mlflow:5000 cannot be reached")


def events(promotions: Promotions, model: str) -> list[tuple[str, str]]:
    return [(event.event, event.actor) for event in promotions.history(model)]


def test_one_approval_moves_the_alias_and_the_registry_carries_the_trail(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    request = promotions.request(ALICE, model, 2, "staging")
    assert (request.state, request.approvals_needed) == (PromotionState.PENDING, 1)
    assert client.get_model_version(model, "2").tags["trainbot.staging.state"] == "pending"
    assert alias(client, model, "staging") is None

    approved = promotions.approve(BOB, request.id)

    assert (approved.state, approved.approvals, approved.previous_version) == (PromotionState.APPROVED, ("U02B",), None)
    assert alias(client, model, "staging") == 2
    # An alias, never a stage (deprecated since MLflow 2.9).
    assert client.get_model_version(model, "2").current_stage == "None"
    tags = client.get_model_version(model, "2").tags
    assert tags["trainbot.staging.request"] == request.id
    assert tags["trainbot.staging.state"] == "approved"
    assert tags["trainbot.staging.requested_by"] == "U01ALICE"
    assert tags["trainbot.staging.approved_by"] == "U02B"
    assert events(promotions, model) == [
        ("promote", "U01ALICE"),
        ("approval", "U02B"),
        ("approvals-met", "U02B"),
        ("approved", "trainbot"),
    ]


def test_nobody_approves_their_own_request(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    request = promotions.request(BOB, model, 2, "staging")
    with pytest.raises(Forbidden, match="nobody approves their own request"):
        promotions.approve(BOB, request.id)
    assert promotions.store.get(request.id).approvals == ()


def test_only_approvers_or_their_groups_approve(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    request = promotions.request(ALICE, model, 2, "production")
    with pytest.raises(Forbidden, match="you are not an approver for production"):
        promotions.approve(DAVE, request.id)
    assert promotions.approve(LEAD, request.id).approvals == ("U05LEAD",)


def test_production_wants_two_distinct_approvals_and_a_second_click_counts_once(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    request = promotions.request(ALICE, model, 2, "production")
    assert request.approvals_needed == 2
    assert promotions.approve(BOB, request.id).state == PromotionState.PENDING
    assert promotions.approve(BOB, request.id).approvals == ("U02B",)
    assert alias(client, model, "production") is None
    assert promotions.approve(CAROL, request.id).state == PromotionState.APPROVED
    assert alias(client, model, "production") == 2
    # A click after the move changes nothing.
    assert promotions.approve(LEAD, request.id).approvals == ("U02B", "U03C")


def test_checks_hold_before_a_request_is_made(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    running = register(client, model, {"val_loss": 1.0}, finished=False)
    with pytest.raises(BadRequest, match=rf"v{running}: its run \w+ is RUNNING"):
        promotions.request(ALICE, model, running, "staging")
    too_high = register(client, model, {"val_loss": 2.5})
    with pytest.raises(BadRequest, match=r"val_loss is 2.5; production needs val_loss < 2"):
        promotions.request(ALICE, model, too_high, "production")
    with pytest.raises(BadRequest, match="unknown target 'prod'"):
        promotions.request(ALICE, model, 2, "prod")
    with pytest.raises(Exception, match="MLflow has no"):
        promotions.request(ALICE, model, 99, "staging")
    assert promotions.requests() == []


def test_a_version_must_beat_the_current_holder_where_the_target_says_so(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    client.set_registered_model_alias(model, "champion", "2")  # val_loss 1.2
    with pytest.raises(BadRequest, match=r"val_loss 1.5 does not beat v2's 1.2 \(min\)"):
        promotions.request(ALICE, model, 1, "champion")
    better = register(client, model, {"val_loss": 0.9})
    assert promotions.request(ALICE, model, better, "champion").state == PromotionState.PENDING


def test_a_click_after_expiry_expires_the_request_and_moves_nothing(promotion_settings, client, model):
    clock = [now()]
    promotions = Promotions(promotion_settings, clock=lambda: clock[0])
    request = promotions.request(ALICE, model, 2, "champion")  # expires: 1h
    clock[0] += timedelta(hours=1, seconds=1)
    with pytest.raises(Conflict, match="expired"):
        promotions.approve(BOB, request.id)
    assert promotions.store.get(request.id).state == PromotionState.EXPIRED
    assert alias(client, model, "champion") is None
    assert client.get_model_version(model, "2").tags["trainbot.champion.state"] == "expired"
    assert promotions.requests(open_only=True) == []


def test_reject_needs_a_reason_and_cancel_only_the_requester(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    first = promotions.request(ALICE, model, 2, "staging")
    with pytest.raises(Conflict, match=f"already has an open request for staging: {first.id}"):
        promotions.request(CAROL, model, 1, "staging")
    with pytest.raises(BadRequest, match="say why"):
        promotions.reject(BOB, first.id, "  ")
    rejected = promotions.reject(BOB, first.id, "eval set leaked")
    assert (rejected.state, rejected.reason) == (PromotionState.REJECTED, "eval set leaked")
    with pytest.raises(Conflict, match="was rejected"):
        promotions.approve(CAROL, first.id)
    second = promotions.request(CAROL, model, 1, "staging")
    with pytest.raises(Forbidden, match="only U03C, who asked, may cancel"):
        promotions.cancel(ALICE, second.id)
    assert promotions.cancel(CAROL, second.id).state == PromotionState.CANCELLED
    assert client.get_model_version(model, "1").tags["trainbot.staging.state"] == "cancelled"
    assert alias(client, model, "staging") is None


def test_an_mlflow_failure_leaves_a_failed_request_that_an_approval_retries(promotion_settings, client, model):
    down = Promotions(promotion_settings, registry=DownRegistry(promotion_settings.tracking_uri()))
    request = down.request(ALICE, model, 2, "staging")
    failed = down.approve(BOB, request.id)
    assert (failed.state, failed.reason) == (PromotionState.FAILED, "MLflow at http://mlflow:5000 cannot be reached")
    assert alias(client, model, "staging") is None

    retried = Promotions(promotion_settings).approve(CAROL, request.id)
    assert retried.state == PromotionState.APPROVED
    assert alias(client, model, "staging") == 2


def test_approvers_clicking_at_once_move_the_alias_once(promotion_settings, client, model):
    registry = CountingRegistry(promotion_settings.tracking_uri())
    promotions = Promotions(promotion_settings, registry=registry)
    request = promotions.request(ALICE, model, 2, "staging")
    barrier = threading.Barrier(6)
    results: list[object] = []

    def click(actor: Actor) -> None:
        barrier.wait()
        results.append(promotions.approve(actor, request.id).state)

    threads = [threading.Thread(target=click, args=(actor,)) for actor in (BOB, CAROL, DAVE) * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert registry.moves == [(model, "staging", 2)]
    assert alias(client, model, "staging") == 2
    history = events(promotions, model)
    assert [name for name, _ in history].count("approvals-met") == 1
    assert [name for name, _ in history].count("approved") == 1
    assert len(promotions.store.get(request.id).approvals) == 1


APPROVE_IN_A_PROCESS = """
import json, sys
from actions.promotions.policy import Actor
from actions.promotions.service import Promotions
from actions.settings import Settings
settings = Settings.model_validate_json(sys.argv[1])
request = Promotions(settings).approve(Actor(sys.argv[3]), sys.argv[2])
print(json.dumps(request.to_dict()))
"""


def test_processes_approving_at_once_move_the_alias_once(promotion_settings, client, model):
    request = Promotions(promotion_settings).request(ALICE, model, 2, "production")
    clickers = [
        subprocess.Popen(
            [sys.executable, "-c", APPROVE_IN_A_PROCESS, promotion_settings.model_dump_json(), request.id, user],
            stdout=subprocess.PIPE,
            text=True,
        )
        for user in ("U02B", "U03C", "U02B", "U03C")
    ]
    answers = [json.loads(clicker.communicate(timeout=120)[0]) for clicker in clickers]
    assert all(clicker.returncode == 0 for clicker in clickers)
    assert {answer["state"] for answer in answers} <= {"pending", "approving", "approved"}
    final = Promotions(promotion_settings).store.get(request.id)
    assert (final.state, sorted(final.approvals)) == (PromotionState.APPROVED, ["U02B", "U03C"])
    moved = [event for event in Promotions(promotion_settings).history(model) if event.actor == "trainbot"]
    assert len(moved) == 1
    assert alias(client, model, "production") == 2


CRASH_AROUND_THE_MOVE = """
import os, sys
from actions.promotions.policy import Actor
from actions.promotions.service import Promotions
from actions.promotions.registry import Registry
from actions.settings import Settings

class Crashing(Registry):
    def move_alias(self, model, alias, version):
        if sys.argv[3] == "after":
            super().move_alias(model, alias, version)
        os._exit(17)  # the process dies with the approval recorded, before it records the move

settings = Settings.model_validate_json(sys.argv[1])
Promotions(settings, registry=Crashing(settings.tracking_uri())).approve(Actor("U02B"), sys.argv[2])
"""


@pytest.mark.parametrize("crash", ["before", "after"])
def test_a_crash_around_the_move_is_finished_on_the_next_start_with_one_move(promotion_settings, client, model, crash):
    client.set_registered_model_alias(model, "staging", "1")
    request = Promotions(promotion_settings).request(ALICE, model, 2, "staging")
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH_AROUND_THE_MOVE, promotion_settings.model_dump_json(), request.id, crash],
        check=False,
    )
    assert crashed.returncode == 17
    assert Promotions(promotion_settings).store.get(request.id).state == PromotionState.APPROVING
    assert alias(client, model, "staging") == (2 if crash == "after" else 1)

    # Within the dead process's lease nobody else moves the alias; after it, the next start finishes.
    registry = CountingRegistry(promotion_settings.tracking_uri())
    assert Promotions(promotion_settings, registry=registry).resume() == []
    later: datetime = now() + APPLY_LEASE + timedelta(seconds=1)
    resumed = Promotions(promotion_settings, registry=registry, clock=lambda: later).resume()
    assert [(request.state, request.previous_version) for request in resumed] == [(PromotionState.APPROVED, 1)]
    assert Promotions(promotion_settings, registry=registry, clock=lambda: later).resume() == []
    # A move the dead process made is not made again: MLflow would announce it twice.
    assert registry.moves == ([] if crash == "after" else [(model, "staging", 2)])
    assert alias(client, model, "staging") == 2


def promote(promotions: Promotions, model: str, version: int, target: str = "staging") -> None:
    request = promotions.request(ALICE, model, version, target)
    assert promotions.approve(BOB, request.id).state == PromotionState.APPROVED


def test_rollback_requests_the_previous_holder_through_the_same_approvals(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    client.set_registered_model_alias(model, "staging", "1")  # by hand, before trainbot
    promote(promotions, model, 2)
    third = register(client, model, {"val_loss": 1.1})
    promote(promotions, model, third)

    back = promotions.rollback(CAROL, model, "staging")
    assert (back.kind, back.version, back.state) == ("rollback", 2, PromotionState.PENDING)
    with pytest.raises(Forbidden, match="nobody approves their own request"):
        promotions.approve(CAROL, back.id)
    assert alias(client, model, "staging") == third
    assert promotions.approve(BOB, back.id).state == PromotionState.APPROVED
    assert alias(client, model, "staging") == 2

    # A second rollback goes one further back (to the hand-set v1), not forward again.
    further = promotions.rollback(CAROL, model, "staging")
    assert further.version == 1
    promotions.approve(BOB, further.id)
    assert alias(client, model, "staging") == 1
    with pytest.raises(BadRequest, match="named no version before v1; there is nothing to roll back to"):
        promotions.rollback(CAROL, model, "staging")
    assert [event.event for event in promotions.history(model)].count("rollback") == 2


def test_rollback_needs_trainbot_to_have_set_the_current_holder(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    with pytest.raises(BadRequest, match="names no version; there is nothing to roll back"):
        promotions.rollback(ALICE, model, "staging")
    promote(promotions, model, 1)
    with pytest.raises(BadRequest, match="named no version before v1"):
        promotions.rollback(ALICE, model, "staging")
    promote(promotions, model, 2)
    client.set_registered_model_alias(model, "staging", "1")  # out of band
    with pytest.raises(BadRequest, match=f"is v1, which no approved request.*trainbot model promote {model} VERSION"):
        promotions.rollback(ALICE, model, "staging")


def test_a_rollback_need_not_beat_the_version_it_replaces(promotion_settings, client, model):
    promotions = Promotions(promotion_settings)
    request = promotions.request(ALICE, model, 1, "champion")  # val_loss 1.5, no holder yet
    promotions.approve(BOB, request.id)
    promote(promotions, model, 2, "champion")  # val_loss 1.2 beats 1.5
    with pytest.raises(BadRequest, match="does not beat"):
        promotions.request(ALICE, model, 1, "champion")
    assert promotions.rollback(ALICE, model, "champion").version == 1


def test_the_cli_prints_json_and_refuses_in_one_line(promotion_settings, model, tmp_path):
    config = tmp_path / "trainbot.yaml"
    config.write_text(json.dumps({"promotion": POLICY}))
    env = {
        "TRAINBOT_CONFIG": str(config),
        "TRAINBOT_DATA_DIR": str(tmp_path),
        "TRAINBOT_MLFLOW_TRACKING_URI": promotion_settings.tracking_uri(),
        "TRAINBOT_STATE_STORE_URL": promotion_settings.state_url(),
    }

    def cli(*args: str) -> object:
        return json.loads(trainbot(env, "model", *args, "-o", "json").stdout)

    def refused(*args: str) -> str:
        result = trainbot(env, "model", *args, check=False)
        assert (result.returncode, result.stdout) == (2, "")
        assert "Traceback" not in result.stderr
        return result.stderr.strip()

    first = cli("promote", model, "1", "staging", "--as", "U01ALICE")
    assert {key: first[key] for key in ("version", "target", "state", "approvals")} == {
        "version": 1,
        "target": "staging",
        "state": "pending",
        "approvals": [],
    }
    assert refused("approve", first["id"], "--as", "U01ALICE") == (
        "trainbot: nobody approves their own request; ask an approver for staging"
    )
    assert cli("approve", first["id"], "--as", "U02B")["state"] == "approved"
    second = cli("promote", model, "2", "staging", "--as", "U01ALICE")
    cli("approve", second["id"], "--as", "U03C")
    back = cli("rollback", model, "staging", "--as", "U01ALICE")
    assert (back["kind"], back["version"]) == ("rollback", 1)
    assert "--reason" in refused("reject", back["id"], "--as", "U02B")
    assert cli("reject", back["id"], "--as", "U02B", "--reason", "v2 is fine")["state"] == "rejected"
    assert [request["id"] for request in cli("requests", "--model", model)] == [back["id"], second["id"], first["id"]]
    assert cli("requests", "--open") == []
    trail = cli("history", model)
    assert [(event["request"], event["event"]) for event in trail][-2:] == [
        (back["id"], "rollback"),
        (back["id"], "rejected"),
    ]
    assert refused("cancel", "pr-00000000", "--as", "U01ALICE") == (
        "trainbot: no promotion request pr-00000000; `trainbot model requests` lists them"
    )
    long_name = "U" * 129
    assert refused("promote", model, "1", "production", "--as", long_name) == (
        f"trainbot: the requester {long_name[:20]!r}… is 129 characters long; the state store keeps at most 128"
    )
    assert cli("requests", "--open") == []
