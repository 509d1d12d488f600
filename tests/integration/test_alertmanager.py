"""Alert threads end to end: a real Alertmanager (Debian's 0.25, loopback, group_wait and group_interval
1 s, repeat_interval 2 s so it keeps sending every group again) notifies a real `trainbot serve`, which
posts the threads to the local Slack stand-in; "Silence 2h" creates a real silence, read back from
Alertmanager's API."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from actions.alerts.threads import AlertThread, AlertThreads
from bot.console.local_slack import Call, button_click_body, post_signed
from tests.paths import TRAINBOT
from tests.servers.alertmanager import alert, missing_binary, post_alerts, running_alertmanager
from tests.servers.processes import free_port, serving
from tests.standins.slack_bot import SECRET, serve_env, texts
from tests.standins.slack_standin import SlackStandIn, slack_standin

pytestmark = pytest.mark.integration

CHANNEL = "C0ALERTS"
ALICE = "U01ALICE"
WAIT_S = 30
T = TypeVar("T")


@pytest.fixture(scope="module", autouse=True)
def alertmanager_installed() -> None:
    if reason := missing_binary():
        pytest.skip(reason)


@pytest.fixture(scope="module")
def slack(module_state_store_url: str) -> Iterator[SlackStandIn]:
    """One stand-in per dialect: each run of the module reads only its own calls."""
    with slack_standin() as stand_in:
        yield stand_in
    stand_in.check_within_limits()


class Trainbot:
    """`trainbot serve` on a fixed port (Alertmanager's receiver URL), restartable."""

    def __init__(self, env: dict[str, str], port: int, folder: Path) -> None:
        self.env, self.port, self.folder = env, port, folder
        self.url = f"http://127.0.0.1:{port}"
        self.threads = AlertThreads(env["TRAINBOT_STATE_STORE_URL"])
        self._running = ExitStack()
        self._starts = 0

    def start(self) -> None:
        self._starts += 1
        command = [str(TRAINBOT), "serve", "--port", str(self.port)]
        log = self.folder / f"serve-{self._starts}.log"
        self._running.enter_context(serving(command, log, f"{self.url}/healthz", self.env))

    def stop(self) -> None:
        self._running.close()


@pytest.fixture(scope="module")
def ports(module_state_store_url: str) -> tuple[int, int]:
    """Per dialect, so each run of the module gets an Alertmanager and a trainbot of its own."""
    return free_port(), free_port()


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory, ports: tuple[int, int]) -> Iterator[str]:
    webhook = f"http://127.0.0.1:{ports[0]}/alerts/alertmanager"
    with running_alertmanager(tmp_path_factory.mktemp("alertmanager"), webhook, repeat_interval="2s") as url:
        yield url


@pytest.fixture(scope="module")
def trainbot(
    tmp_path_factory: pytest.TempPathFactory,
    ports: tuple[int, int],
    alertmanager: str,
    slack: SlackStandIn,
    module_state_store_url: str,
) -> Iterator[Trainbot]:
    folder = tmp_path_factory.mktemp("trainbot")
    env = serve_env(
        slack, folder, alerts_channel=CHANNEL, alertmanager_url=alertmanager, state_store_url=module_state_store_url
    )
    served = Trainbot(env, ports[0], folder)
    served.start()
    try:
        yield served
    finally:
        served.stop()


def eventually(find: Callable[[], T], what: str, timeout_s: float = WAIT_S) -> T:
    """What `find` returns once it is truthy; fails the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not (found := find()):
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout_s} s")
        time.sleep(0.2)
    return found


def parent_of(slack: SlackStandIn, title: str) -> Call:
    def find() -> list[Call]:
        return [
            call
            for call in list(slack.calls)
            if call.method == "chat.postMessage"
            and "thread_ts" not in call.params
            and call.params["text"].split(": ")[1:2] == [title]
        ]

    return eventually(find, f"thread for {title}")[0]


def the_jobs_diagnosis(call: Call) -> bool:
    """The job's diagnosis, which a new thread gets once, on its own pool: it may come before or after a reply."""
    return call.params.get("text", "").startswith("No diagnosis of")


def replies_to(slack: SlackStandIn, parent: Call, count: int) -> list[Call]:
    """The alert replies in the parent's thread (not the job's diagnosis), once there are `count`."""

    def find() -> list[Call]:
        found = [
            call
            for call in list(slack.calls)
            if call.params.get("thread_ts") == parent.answer["ts"] and not the_jobs_diagnosis(call)
        ]
        return found if len(found) >= count else []

    return eventually(find, f"{count} replies to {parent.params['text']!r}")


def edits_of(slack: SlackStandIn, parent: Call, containing: str) -> Call:
    def find() -> list[Call]:
        return [
            call
            for call in list(slack.calls)
            if call.method == "chat.update"
            and call.params["ts"] == parent.answer["ts"]
            and containing in texts(call.params)
        ]

    return eventually(find, f"edit of {parent.params['text']!r} saying {containing!r}")[-1]


def thread_where(trainbot: Trainbot, key: str, holds: Callable[[AlertThread], bool]) -> AlertThread:
    def find() -> AlertThread | None:
        try:
            thread = trainbot.threads.get(key)
        except Exception:
            return None
        return thread if holds(thread) else None

    return eventually(find, f"thread {key} in the expected state")


def job_labels(job: str, alertname: str) -> dict[str, str]:
    return {"alertname": alertname, "namespace": "ml", "rayjob": job, "job": "dcgm-exporter", "pod": f"{job}-w-1"}


def webhook_notifications(alertmanager: str) -> float:
    metrics = requests.get(f"{alertmanager}/metrics", timeout=10).text
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == "alertmanager_notifications_total" and sample.labels.get("integration") == "webhook":
                return sample.value
    return 0.0


def test_a_jobs_alerts_open_one_thread_that_survives_a_restart_and_resolution_edits_it(alertmanager, trainbot, slack):
    began = datetime.now(UTC)
    hot, stall = alert(job_labels("llm-ft", "GPUHot"), began), alert(job_labels("llm-ft", "NCCLStall"), began)
    post_alerts(alertmanager, [hot, stall])
    parent = parent_of(slack, "ml/llm-ft")
    assert parent.params["channel"] == CHANNEL
    assert parent.params["text"] == "Firing: ml/llm-ft: GPUHot, NCCLStall"
    [first] = replies_to(slack, parent, 1)
    assert texts(first.params).startswith("*2 new* · 2 of 2 alerts firing")

    trainbot.stop()
    trainbot.start()
    xid = alert(job_labels("llm-ft", "XidError"), began + timedelta(seconds=1))
    post_alerts(alertmanager, [xid])
    edits_of(slack, parent, "GPUHot, NCCLStall, XidError")
    second = replies_to(slack, parent, 2)[-1]
    assert texts(second.params).startswith("*1 new* · 3 of 3 alerts firing\n:red_circle: `XidError` firing since")

    ended = datetime.now(UTC)
    post_alerts(alertmanager, [alert(each["labels"], began, ended) for each in (hot, stall)] + [
        alert(xid["labels"], began + timedelta(seconds=1), ended)
    ])  # fmt: skip
    resolved = edits_of(slack, parent, ":white_check_mark: *Resolved* · `ml/llm-ft` · GPUHot, NCCLStall, XidError")
    assert [block["type"] for block in resolved.params["blocks"]] == ["section", "context"]  # no button now
    last = replies_to(slack, parent, 3)[-1]
    assert texts(last.params).startswith("*3 new* · 0 of 3 alerts firing\n:white_check_mark: `GPUHot` resolved")
    thread = thread_where(trainbot, "ml/rayjob=llm-ft", lambda thread: thread.status == "resolved")
    assert (thread.events, thread.alerts, thread.firing) == (6, 3, 0)
    # One thread only: the restart found it again.
    opened = [call for call in slack.calls if call.method == "chat.postMessage" and "thread_ts" not in call.params]
    assert [call for call in opened if call.params["text"].startswith("Firing: ml/llm-ft")] == [parent]


def test_alertmanager_sending_a_group_again_and_again_adds_nothing(alertmanager, trainbot, slack):
    post_alerts(alertmanager, [alert(job_labels("resnet-sweep", "GPUHot"), datetime.now(UTC))])
    parent = parent_of(slack, "ml/resnet-sweep")
    replies_to(slack, parent, 1)
    sent = webhook_notifications(alertmanager)
    eventually(lambda: webhook_notifications(alertmanager) >= sent + 3, "three more webhook notifications")
    time.sleep(3)  # two poster rounds
    assert trainbot.threads.get("ml/rayjob=resnet-sweep").events == 1
    in_thread = [
        call
        for call in slack.calls
        if parent.answer["ts"] in (call.params.get("thread_ts"), call.params.get("ts")) and not the_jobs_diagnosis(call)
    ]
    assert len(in_thread) == 1


def silences(alertmanager: str) -> list[dict]:
    return requests.get(f"{alertmanager}/api/v2/silences", timeout=10).json()


def click_silence(trainbot: Trainbot, slack: SlackStandIn, parent: Call, user: str) -> None:
    value = parent.params["blocks"][-1]["elements"][0]["value"]
    body = button_click_body(slack, "alert_silence", value, user, parent)
    assert post_signed(f"{trainbot.url}/slack/events", SECRET, body).status_code == 200


def test_silence_2h_creates_a_silence_for_exactly_the_threads_alerts(alertmanager, trainbot, slack):
    now = datetime.now(UTC)
    post_alerts(alertmanager, [alert(job_labels("bert-ft", "GPUHot"), now), alert(job_labels("gpt-ft", "GPUHot"), now)])
    parent = parent_of(slack, "ml/bert-ft")
    assert parent.params["blocks"][-1]["elements"][0]["action_id"] == "alert_silence"
    clicked = datetime.now(UTC)
    click_silence(trainbot, slack, parent, ALICE)

    said = next(call for call in replies_to(slack, parent, 2) if "silenced" in call.params["text"])
    [silence] = [each for each in silences(alertmanager) if each["createdBy"] == ALICE]
    ends = datetime.fromisoformat(silence["endsAt"])
    assert texts(said.params) == (
        f":mute: <@{ALICE}> silenced these alerts until {ends:%Y-%m-%d %H:%M:%S} UTC: "
        f'`rayjob="bert-ft", namespace="ml"` (Alertmanager silence `{silence["id"]}`)'
    )
    assert silence["status"]["state"] == "active"
    assert sorted((m["name"], m["value"], m["isEqual"], m["isRegex"]) for m in silence["matchers"]) == [
        ("namespace", "ml", True, False),
        ("rayjob", "bert-ft", True, False),
    ]
    starts = datetime.fromisoformat(silence["startsAt"])
    assert abs(starts - clicked) < timedelta(seconds=30)
    assert timedelta(hours=2) - timedelta(seconds=30) < ends - starts <= timedelta(hours=2, seconds=1)
    assert "bert-ft" in silence["comment"]

    # Alertmanager itself now silences that job's alert, and not the other job's.
    alerts = requests.get(f"{alertmanager}/api/v2/alerts", timeout=10).json()
    silenced_by = {
        each["labels"]["rayjob"]: each["status"]["silencedBy"] for each in alerts if "rayjob" in each["labels"]
    }
    assert (silenced_by["bert-ft"], silenced_by["gpt-ft"]) == ([silence["id"]], [])
    edited = edits_of(slack, parent, f"silenced by <@{ALICE}> until")
    assert "Silence 2h" in texts(edited.params)
    assert trainbot.threads.get("ml/rayjob=bert-ft").silence_id == silence["id"]


def test_a_silence_alertmanager_refuses_is_told_to_the_clicker_only(alertmanager, trainbot, slack):
    """Alerts with neither alertname nor job labels: their thread's matchers all match the empty string,
    which Alertmanager refuses."""
    post_alerts(alertmanager, [alert({"severity": "page", "instance": "gpu-node-7:9400"}, datetime.now(UTC))])
    parent = parent_of(slack, "(no alertname)")
    before = len(silences(alertmanager))
    click_silence(trainbot, slack, parent, "U02BOB")
    said = eventually(
        lambda: [
            call
            for call in list(slack.calls)
            if call.method == "chat.postEphemeral" and call.params["user"] == "U02BOB"
        ],
        "an ephemeral message to the clicker",
    )[0]
    assert said.params["channel"] == CHANNEL
    assert said.params["text"] == (
        f"Alertmanager at {alertmanager} refused the silence (HTTP 400: silence invalid: at least one matcher must "
        "not match the empty string), so nothing was silenced"
    )
    assert len(silences(alertmanager)) == before
    time.sleep(1)
    assert not [
        call
        for call in slack.calls
        if call.params.get("thread_ts") == parent.answer["ts"] and "silenced" in call.params["text"]
    ]
