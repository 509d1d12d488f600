"""`trainbot serve` as a process on a free loopback port, driven over HTTP (and raw sockets where a client
library would refuse to send the request): its bounds, its answers to malformed and replayed requests,
its log, its metrics, and its graceful stop."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import socket
import subprocess
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
import requests
from mlflow.webhooks.delivery import _generate_hmac_signature
from prometheus_client.parser import text_string_to_metric_families

from bot.console.local_slack import Call, signed_headers, slash_command_body
from bot.web.mlflow_webhook import DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER
from tests.paths import TRAINBOT
from tests.servers.alertmanager import alert, notification
from tests.servers.processes import free_port, serving
from tests.standins.slack_bot import SECRET, serve_env
from tests.standins.slack_standin import SlackStandIn, slack_standin

MLFLOW_SECRET = "mlflow-webhook-secret-of-the-served-app"
READ_TIMEOUT_S = 1
GRACE_S = 20


@dataclass(frozen=True)
class Served:
    url: str
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def slack(self, body: str | bytes, headers: dict[str, str]) -> requests.Response:
        return requests.post(f"{self.url}/slack/events", data=body, headers=headers, timeout=10)


def env_for(folder: Path, slack: SlackStandIn, **more: str) -> dict[str, str]:
    """A `trainbot serve` answering Slack through `slack`, MLflow's webhooks with MLFLOW_SECRET, with no Ray head
    (so /train status answers at once)."""
    return serve_env(slack, folder, local_dashboard_port=str(free_port()), mlflow_webhook_secret=MLFLOW_SECRET, **more)


@contextmanager
def trainbot_serve(folder: Path, env: dict[str, str]) -> Iterator[Served]:
    port = free_port()
    url, log = f"http://127.0.0.1:{port}", folder / f"serve-{port}.log"
    command = [
        str(TRAINBOT),
        "serve",
        "--port",
        str(port),
        "--read-timeout",
        str(READ_TIMEOUT_S),
        "--grace",
        str(GRACE_S),
    ]
    with serving(command, log, f"{url}/healthz", env) as process:
        yield Served(url, log, process)


@pytest.fixture(scope="module")
def module_slack() -> Iterator[SlackStandIn]:
    with slack_standin() as served:
        yield served


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_slack: SlackStandIn) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve")
    with trainbot_serve(folder, env_for(folder, module_slack)) as served:
        yield served


def answered(server: Served) -> float:
    """Every answer /metrics has counted, this scrape's own excluded (it is counted after it is made)."""
    exposition = requests.get(f"{server.url}/metrics", timeout=10).text
    families = {family.name: family for family in text_string_to_metric_families(exposition)}
    return sum(sample.value for sample in families["trainbot_http_requests"].samples if sample.name.endswith("_total"))


def raw_exchange(server: Served, request: bytes) -> int:
    """Send `request` as is; the status of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        connection.sendall(request)
        head = connection.recv(65536)
    return int(head.split(b" ", 2)[1])


def signed_bytes(body: bytes, timestamp: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}


T0 = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
DEEP = b"[" * 100_000 + b"]" * 100_000


# --- bounds ------------------------------------------------------------------------------------------------


def test_connections_stalled_mid_body_hold_no_thread_and_are_closed_while_others_are_answered(server):
    process = psutil.Process(server.process.pid)
    threads_before = process.num_threads()
    stalled = []
    for _ in range(300):
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        connection.sendall(b'POST /alerts/alertmanager HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"vers')
        stalled.append(connection)
    try:
        time.sleep(0.5)
        assert process.num_threads() <= threads_before + 2
        # Queued behind the stalled ones over the connection limit, each dropped after 1-2 read timeouts.
        assert requests.get(f"{server.url}/healthz", timeout=10 * READ_TIMEOUT_S).status_code == 200
        # Each is closed once silent past the read timeout, those beyond the connection limit once let in.
        for connection in stalled:
            assert connection.recv(1024) == b""
    finally:
        for connection in stalled:
            connection.close()


def test_a_body_over_the_limit_is_refused_before_it_is_sent(server):
    before = answered(server)
    status = raw_exchange(server, b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
    assert status == 413
    assert answered(server) == before + 2


# --- malformed and unauthenticated -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400),
        (b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
    ],
    ids=["length-abc", "length-negative"],
)
def test_a_malformed_content_length_is_a_counted_400(server, request_bytes, status):
    before = answered(server)
    assert raw_exchange(server, request_bytes) == status
    assert answered(server) == before + 2


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"text=\xff\xfe", {}),
        (b"payload=%7Bnot-json", {}),
        (b"text=hi", {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=" + "0" * 64}),
        (DEEP, {"Content-Type": "application/json"}),
        (b"text=hi", {**signed_bytes(b"text=hi"), "X-Slack-Signature": "v0=nothex"}),
        (b"text=hi", signed_bytes(b"text=hi", timestamp=int(time.time()) - 600)),
    ],
    ids=["not-utf8", "payload-not-json", "timestamp-abc", "deep-json", "signature-garbled", "too-old"],
)
def test_an_unauthenticated_request_is_a_counted_401_with_no_traceback(server, body, headers):
    before = answered(server)
    answer = server.slack(body, headers)
    assert answer.status_code == 401, answer.text
    assert answered(server) == before + 2
    assert "Traceback" not in server.log.read_text()


@pytest.mark.parametrize(
    "body",
    [b"text=\xff\xfe", b"payload=%7Bnot-json", b"payload=" + urllib.parse.quote(DEEP).encode(), b"payload=1"],
    ids=["not-utf8", "payload-not-json", "payload-deep", "payload-not-object"],
)
def test_a_signed_but_unreadable_body_is_a_counted_400(server, body):
    before = answered(server)
    answer = server.slack(body, {**signed_bytes(body), "Content-Type": "application/x-www-form-urlencoded"})
    assert answer.status_code == 400, answer.text
    assert answered(server) == before + 2
    assert "Traceback" not in server.log.read_text()


# --- the log -----------------------------------------------------------------------------------------------


def test_bodies_are_never_logged_and_a_request_is_one_escaped_line(server):
    forged = "text=hi\n2026-11-24 02:00:00,000 INFO bot.web.app: FORGED admin logged in\n" + "x" * 10_000
    answer = server.slack(forged, {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=1"})
    assert answer.status_code == 401
    request_id = answer.headers["X-Request-Id"]
    log = server.log.read_text()
    assert "FORGED" not in log and "xxxxxxxxxx" not in log
    [line] = [line for line in log.splitlines() if f"request={request_id}" in line]
    assert f'method="POST" path="/slack/events" status=401 bytes_in={len(forged)}' in line
    # A path a client chose is escaped on its line too.
    assert raw_exchange(server, b"GET /nowhere%0A2026-11-24%20FORGED HTTP/1.1\r\nHost: x\r\n\r\n") == 404
    assert "\n2026-11-24 FORGED" not in server.log.read_text()


# --- webhooks: bounded JSON --------------------------------------------------------------------------------


HOSTILE_JSON = {
    "deep": DEEP,
    "lone-surrogate": json.dumps(notification([alert({"alertname": "GPUHot"}, T0)]))
    .replace("GPUHot", "GPU\\ud800")
    .encode(),
    "5000-digits": b'{"version": "4", "alerts": [' + b"9" * 5000 + b"]}",
}


@pytest.mark.parametrize("body", HOSTILE_JSON.values(), ids=HOSTILE_JSON.keys())
def test_hostile_json_to_alertmanagers_webhook_is_a_400(server, body):
    answer = requests.post(f"{server.url}/alerts/alertmanager", data=body, timeout=10)
    assert answer.status_code == 400, answer.text
    assert "the body is not JSON" in answer.json()["error"]


@pytest.mark.parametrize("body", HOSTILE_JSON.values(), ids=HOSTILE_JSON.keys())
def test_hostile_json_to_mlflows_webhook_is_a_400(server, body):
    delivery, timestamp = str(uuid.uuid4()), str(int(time.time()))
    # MLflow's signer takes text; the bytes here are ASCII.
    headers = {
        DELIVERY_HEADER: delivery,
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: _generate_hmac_signature(MLFLOW_SECRET, delivery, timestamp, body.decode()),
    }
    answer = requests.post(f"{server.url}/webhooks/mlflow", data=body, headers=headers, timeout=10)
    assert answer.status_code == 400, answer.text
    assert "the delivery is not JSON" in answer.json()["error"]


# --- replays -----------------------------------------------------------------------------------------------


def test_a_signed_request_is_taken_once_across_replicas_and_slacks_retry_is_acked_without_the_work(
    tmp_path, slack, state_store_url
):
    with ExitStack() as stack:
        first, second = (
            stack.enter_context(
                trainbot_serve(tmp_path, env_for(tmp_path / name, slack, state_store_url=state_store_url))
            )
            for name in ("a", "b")
        )
        body = slash_command_body(slack, "/train", "status no-such-job")
        headers = signed_headers(SECRET, body)
        assert first.slack(body, headers).status_code == 200
        slack.wait_for("response_url")
        # The replica that took it refuses it at once; the other acks it, and the store keeps its work undone.
        replayed = first.slack(body, headers)
        assert replayed.status_code == 401
        assert "a replay is refused" in replayed.json()["error"]
        assert second.slack(body, headers).status_code == 200
        assert second.slack(body, headers).status_code == 401

        retried_body = slash_command_body(slack, "/train", "status no-such-job")
        retry = second.slack(retried_body, {**signed_headers(SECRET, retried_body), "X-Slack-Retry-Num": "1"})
        assert retry.status_code == 200
        time.sleep(1)
        assert len([call for call in slack.calls if call.method == "response_url"]) == 1


# --- graceful stop -----------------------------------------------------------------------------------------


def test_sigterm_finishes_every_acked_command_then_exits(tmp_path, slack):
    def slow_reply(call: Call) -> None:
        if call.method == "response_url":
            time.sleep(0.3)  # 20 replies on 2 workers: 3 s of work, most of it left when SIGTERM comes

    slack.listeners.append(slow_reply)
    with trainbot_serve(tmp_path, env_for(tmp_path, slack)) as served:
        bodies = [slash_command_body(slack, "/train", "status no-such-job") for _ in range(20)]
        with ThreadPoolExecutor(20) as senders:
            acks = list(senders.map(lambda body: served.slack(body, signed_headers(SECRET, body)), bodies))
        assert [ack.status_code for ack in acks] == [200] * 20
        assert len([call for call in slack.calls if call.method == "response_url"]) < 20
        stopped_at = time.monotonic()
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=GRACE_S + 5) == 0
        assert time.monotonic() - stopped_at < GRACE_S
        assert len(slack.wait_for("response_url", 20, timeout_s=1)) == 20
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{served.url}/healthz", timeout=2)
