"""Every call to another service has a timeout and bounded retries, and work bound for one backend never takes
the Slack workers everything else needs. The services are played by a socket that accepts and never answers
(tests/standins/silent_server.py); the commands a person runs against it are in
tests/integration/test_silent_services.py.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from mlflow import MlflowClient
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError
from sqlalchemy import text

from actions.errors import Unavailable
from actions.jobs.records import Store
from actions.promotions.policy import Actor
from actions.promotions.registry import MlflowHttp, Registry
from actions.promotions.service import Promotions
from actions.settings import Settings
from bot.console.local_slack import post_signed, slash_command_body
from bot.render.blocks import render
from bot.services import Services
from bot.slack.acked_work import AckedWork
from bot.slack.app import _answering, build_slack_app
from bot.slack.poster import paced_client
from bot.web.app import make_app
from tests.builders.model_registry import register
from tests.standins.silent_server import HOST, silent_server
from tests.standins.slack_bot import SECRET, command, serving_in_thread, slack_settings, texts
from tests.standins.slack_standin import SlackStandIn

STAGING = {"targets": {"staging": {"approvers": ["U02B"]}}}


@pytest.fixture
def silent_port() -> Iterator[int]:
    with silent_server() as port:
        yield port


def ended_within(seconds: float, call: Callable[[], object]) -> BaseException | None:
    """What `call` raised (None if it returned), failing the test if it still runs after `seconds`: a call
    without a timeout would otherwise hang the test run."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds} s"
    return outcome[0]


# MLflow


def test_mlflow_gets_trainbots_timeout_and_retries_but_keeps_what_a_person_set(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "9")
    MlflowHttp.of(Settings(mlflow_request_timeout_s=2, mlflow_request_max_retries=1)).apply()

    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "9"
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"
    assert os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == "1"
    assert os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"] == "0.5"


def test_once_mlflow_cannot_be_reached_the_next_calls_say_so_at_once(silent_port):
    """Before: each call waited out the timeout and retries again, so `model requests` mirroring N expired
    requests into tags, or an approval reading the alias and then tagging, took N times as long."""
    registry = Registry(f"http://{HOST}:{silent_port}", MlflowHttp(1, 0, 0, 0))

    first = ended_within(10, lambda: registry.alias_holder("m", "staging"))
    began = time.monotonic()
    second = ended_within(10, lambda: registry.tag("m", 1, {"trainbot.staging.state": "failed"}))

    assert time.monotonic() - began < 0.5
    expected = f"MLflow at http://{HOST}:{silent_port} cannot be reached (no answer within 1 s)"
    assert isinstance(first, Unavailable) and str(first).startswith(expected)
    assert isinstance(second, Unavailable) and str(second) == str(first)


def test_slack_hears_an_approval_against_a_silent_mlflow_within_10_s(tmp_path: Path, slack: SlackStandIn):
    """With a 5 s timeout and no retry, one wait is the whole cost: before, reading the alias and then recording
    the failure in its tags waited twice, past 10 s."""
    data = tmp_path / "data"
    data.mkdir()
    mlflow_uri = f"sqlite:///{data / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=mlflow_uri, registry_uri=mlflow_uri)
    client.create_experiment("sweeps", artifact_location=str(tmp_path / "artifacts"))
    client.create_registered_model("m")
    register(client, "m", {"val_loss": 1.0})
    up = slack_settings(
        data, slack, mlflow_tracking_uri=mlflow_uri, promotion=STAGING, mlflow_request_timeout_s=5,
        mlflow_request_max_retries=0,
    )  # fmt: skip
    request = Promotions(up).request(Actor("U01ALICE"), "m", 1, "staging").id
    with silent_server() as port:
        down = up.model_copy(update={"mlflow_tracking_uri": f"http://{HOST}:{port}"})
        for bot in serving_in_thread(
            make_app(Promotions(down), SlackRequestHandler(build_slack_app(Services(down)).app))
        ):
            began = time.monotonic()
            reply = command(bot, slack, "/model", f"approve {request}", user="U02B")
            took = time.monotonic() - began

    assert f"failed: MLflow at http://{HOST}:{port} cannot be reached (no answer within 5 s)" in texts(reply)
    assert took < 10


# PostgreSQL


def test_a_postgresql_url_carries_the_connect_statement_and_lock_timeouts():
    url = Settings(state_store_url="postgresql+psycopg://u:p@db/trainbot?sslmode=require").state_url()
    query = parse_qs(urlsplit(url).query)

    assert url.startswith("postgresql+psycopg://u:p@db/trainbot?")
    assert query == {
        "sslmode": ["require"],
        "connect_timeout": ["3"],
        "options": ["-c statement_timeout=30000 -c lock_timeout=10000"],
    }


def test_what_the_postgresql_url_says_wins():
    given = "postgresql+psycopg://db/t?connect_timeout=20&options=-c%20lock_timeout%3D1s%20-c%20search_path%3Dml"
    query = parse_qs(urlsplit(Settings(state_store_url=given).state_url()).query)

    assert query["connect_timeout"] == ["20"]
    assert query["options"] == ["-c lock_timeout=1s -c search_path=ml -c statement_timeout=30000"]


def test_a_sqlite_url_is_left_as_it_is(tmp_path):
    assert Settings(state_store_url=f"sqlite:///{tmp_path}/s.db").state_url() == f"sqlite:///{tmp_path}/s.db"


def test_postgresql_ends_a_statement_at_the_statement_timeout(postgres_url):
    store = Store(Settings(state_store_url=postgres_url, state_store_statement_timeout_s=0.5).state_url())
    began = time.monotonic()
    with (
        pytest.raises(Unavailable, match=r"^PostgreSQL at postgresql\+psycopg://.* ended a statement at its "),
        store.engine.connect() as connection,
    ):
        connection.execute(text("SELECT pg_sleep(20)"))
    assert time.monotonic() - began < 5
    store.close()


def test_postgresql_ends_a_wait_for_a_lock_at_the_lock_timeout(postgres_url):
    settings = Settings(state_store_url=postgres_url, state_store_lock_timeout_s=0.5)
    holder, waiter = Store(settings.state_url()), Store(settings.state_url())
    holder.create_schema()
    with holder.engine.begin() as holding:
        holding.execute(text("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"))
        with (
            pytest.raises(Unavailable, match=r"ended a statement at its lock_timeout"),
            waiter.engine.connect() as connection,
        ):
            connection.execute(text("SELECT count(*) FROM jobs"))
    holder.close()
    waiter.close()


# Ray


def test_every_job_submission_request_has_a_timeout(silent_port):
    from actions.jobs.backends.ray_jobs_client import TimedJobSubmissionClient  # noqa: PLC0415 - Ray loads slowly

    error = ended_within(5, lambda: TimedJobSubmissionClient(f"http://{HOST}:{silent_port}", (1.0, 1.0)))

    assert isinstance(error, requests.Timeout)


# Slack


def test_a_silent_slack_api_fails_the_call_within_the_timeout(silent_port):
    client = paced_client("xoxb-test", f"http://{HOST}:{silent_port}/api/", timeout_s=1)

    error = ended_within(5, lambda: client.chat_postMessage(channel="C0ML", text="hello"))

    assert isinstance(error, (OSError, SlackClientError))


def test_a_reply_to_a_silent_response_url_ends_within_the_clients_timeout(silent_port):
    """Bolt's own `respond` waits 30 s on a response_url whatever the client's timeout."""
    reply = _answering(lambda slash: render("error", "x", message="x"), lambda work, tell, context: work())
    command = {"response_url": f"http://{HOST}:{silent_port}/commands/1", "user_id": "U01ALICE", "text": ""}

    error = ended_within(5, lambda: reply(command, WebClient(token="xoxb-test", timeout=1)))

    assert isinstance(error, OSError)


def test_the_bot_names_a_silent_slack_at_start(tmp_path, silent_port):
    url = f"http://{HOST}:{silent_port}/api/"
    settings = Settings(data_dir=tmp_path, slack_bot_token="xoxb-test", slack_signing_secret=SECRET, slack_api_url=url)

    error = ended_within(10, lambda: build_slack_app(Services(settings)))

    assert isinstance(error, Unavailable)
    assert str(error).startswith(f"Slack at {url} did not accept SLACK_BOT_TOKEN")


# The bulkhead behind Slack's acks


def test_work_for_a_stuck_backend_leaves_the_general_workers_free():
    work = AckedWork(workers=1, lane_workers=1)
    stuck, released, done = threading.Event(), threading.Event(), threading.Event()

    def hang(body, client):
        stuck.set()
        released.wait(10)

    listener_stuck = work.listener(hang, lane=lambda body: "mlflow")
    listener_general = work.listener(lambda body, client: done.set())
    for _ in range(3):
        listener_stuck(ack=lambda **_: None, body={}, client=None)
    assert stuck.wait(5)
    listener_general(ack=lambda **_: None, body={}, client=None)

    assert done.wait(2)
    assert work.waiting() == 2  # the other two stuck ones wait in their own lane
    released.set()


def test_two_promotions_stuck_on_mlflow_leave_train_help_answering_at_once(tmp_path: Path, slack: SlackStandIn):
    """Before: two stuck `/model promote` held both workers, and `/train help` waited as long as MLflow did."""
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = "8"  # put back by the conftest's fixture
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    with silent_server() as port:
        settings = slack_settings(
            tmp_path, slack, slack_workers=2, mlflow_tracking_uri=f"http://{HOST}:{port}", promotion=STAGING
        )
        promotions = Promotions(settings)
        for bot in serving_in_thread(
            make_app(promotions, SlackRequestHandler(build_slack_app(Services(settings, promotions=promotions)).app))
        ):
            for _ in range(2):
                answer = post_signed(bot, SECRET, slash_command_body(slack, "/model", "promote m 1 staging"))
                assert answer.status_code == 200
            time.sleep(0.5)  # both promotions are waiting on MLflow now

            began = time.monotonic()
            reply = command(bot, slack, "/train", "help")
            assert time.monotonic() - began < 2
            assert "launch" in texts(reply)

            replies = slack.wait_for("response_url", 3, timeout_s=30)
            heard = [texts(each.params) for each in replies]
            assert (
                sum(f"MLflow at http://{HOST}:{port} cannot be reached (no answer within 8 s)" in s for s in heard) == 2
            )
