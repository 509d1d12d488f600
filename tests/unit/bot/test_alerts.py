"""Alertmanager's webhook into alert threads: bodies shaped exactly as Alertmanager 0.25 sends them, over
HTTP to the real WSGI app, recorded in a real state store (sqlite and PostgreSQL), posted by the alert
poster to the local Slack stand-in (threads, replies, edits, the storm digest), and the Silence button
against an Alertmanager that is not there."""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from wsgiref.simple_server import make_server

import pytest
import requests
from slack_bolt.adapter.wsgi import SlackRequestHandler

from actions.alerts.threads import AlertThreads, thread_for
from actions.promotions.service import Promotions
from actions.settings import Settings
from actions.state.posts import Post, SlackPosts
from bot.console.local_slack import Call, button_click_body, post_signed
from bot.http.server import in_thread, serving_locally
from bot.services import Services
from bot.slack.alert_poster import POLL_S, AlertPoster, start_alert_poster
from bot.slack.app import build_slack_app
from bot.slack.poster import ChannelPacer, SlackPoster, paced_client
from bot.web.app import make_app, start_everything
from tests.paths import TRAINBOT
from tests.servers.alertmanager import alert, notification
from tests.servers.processes import free_port, serving
from tests.standins.slack_bot import SECRET, serve_env, slack_settings, texts
from tests.standins.slack_standin import SlackStandIn

CHANNEL = "C0ALERTS"
T0 = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
GPU_HOT = {"alertname": "GPUHot", "namespace": "ml", "rayjob": "llm-ft", "job": "dcgm-exporter", "pod": "llm-ft-w-1"}
NCCL_STALL = {"alertname": "NCCLStall", "namespace": "ml", "rayjob": "llm-ft", "job": "ray"}
THREAD = "ml/rayjob=llm-ft"


@pytest.fixture
def threads(settings: Settings) -> AlertThreads:
    store = AlertThreads(settings.state_url(), settings.alert_thread_labels)
    store.create_schema()
    return store


@pytest.fixture
def webhook(settings: Settings, threads: AlertThreads) -> Iterator[str]:
    with in_thread(make_server("127.0.0.1", 0, make_app(Promotions(settings), alerts=threads))) as url:
        yield f"{url}/alerts/alertmanager"


def deliver(url: str, body: dict) -> dict:
    answer = requests.post(url, data=json.dumps(body), headers={"Content-Type": "application/json"}, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def poster_for(slack: SlackStandIn, settings: Settings, paced: bool = False) -> SlackPoster:
    posts = SlackPosts(settings.state_url())
    posts.create_schema()
    return SlackPoster(
        paced_client("xoxb-test", slack.api_url, timeout_s=10), posts, None if paced else ChannelPacer(interval_s=0)
    )


def alert_poster(slack: SlackStandIn, settings: Settings, threads: AlertThreads, **options) -> AlertPoster:
    return AlertPoster(poster_for(slack, settings), threads, CHANNEL, silenceable=True, **options)


def posted(slack: SlackStandIn) -> list[Call]:
    return [call for call in slack.calls if call.method == "chat.postMessage"]


def buttons(call: Call) -> list[str]:
    return [e["action_id"] for block in call.params["blocks"] if block["type"] == "actions" for e in block["elements"]]


# --- the webhook and the state store ---------------------------------------------------------------------


def test_a_grouped_firing_notification_is_one_thread_for_its_job(webhook, threads):
    body = notification(
        [alert(GPU_HOT, T0, annotations={"summary": "GPU 3 at 92 C"}), alert(NCCL_STALL, T0 + timedelta(seconds=30))]
    )
    assert deliver(webhook, body) == {"recorded": 2, "duplicates": 0, "threads": [THREAD]}
    thread = threads.get(THREAD)
    assert (thread.status, thread.alertnames, thread.firing, thread.alerts, thread.events) == (
        "firing",
        ("GPUHot", "NCCLStall"),
        2,
        2,
        2,
    )
    assert (thread.job, thread.namespace, thread.firing_since) == ("llm-ft", "ml", T0)
    assert thread.matchers == {"rayjob": "llm-ft", "namespace": "ml"}
    [news] = threads.pending()
    assert sorted((event.alertname, event.annotations) for event in news.events) == [
        ("GPUHot", {"summary": "GPU 3 at 92 C"}),
        ("NCCLStall", {}),
    ]


def test_alertmanager_sending_the_group_again_records_nothing_new(webhook, threads):
    body = notification([alert(GPU_HOT, T0), alert(NCCL_STALL, T0)])
    deliver(webhook, body)
    assert deliver(webhook, body) == {"recorded": 0, "duplicates": 2, "threads": []}
    assert threads.get(THREAD).events == 2
    assert sum(len(news.events) for news in threads.pending()) == 2


def test_resolution_ends_the_thread_and_a_new_period_fires_it_again(webhook, threads):
    deliver(webhook, notification([alert(GPU_HOT, T0), alert(NCCL_STALL, T0)]))
    first = threads.get(THREAD)
    deliver(webhook, notification([alert(GPU_HOT, T0, ends_at=T0 + timedelta(minutes=5)), alert(NCCL_STALL, T0)]))
    partly = threads.get(THREAD)
    assert (partly.status, partly.firing, partly.revision) == ("firing", 1, first.revision)  # headline unchanged
    ended = T0 + timedelta(minutes=7)
    resolved = notification([alert(GPU_HOT, T0, ends_at=T0 + timedelta(minutes=5)), alert(NCCL_STALL, T0, ended)])
    assert deliver(webhook, resolved)["recorded"] == 1
    thread = threads.get(THREAD)
    assert (thread.status, thread.firing, thread.resolved_at) == ("resolved", 0, ended)
    assert thread.revision == first.revision + 1

    # Alertmanager sending the first notification again changes nothing.
    assert deliver(webhook, notification([alert(NCCL_STALL, T0)]))["duplicates"] == 1
    assert threads.get(THREAD).status == "resolved"

    # The same alert firing again later is a new period: the same thread fires again.
    again = T0 + timedelta(hours=1)
    assert deliver(webhook, notification([alert(NCCL_STALL, again)]))["recorded"] == 1
    thread = threads.get(THREAD)
    assert (thread.status, thread.firing_since, thread.events) == ("firing", again, 5)


def test_a_firing_that_arrives_after_its_own_resolution_is_recorded_but_announces_nothing(webhook, threads):
    """Two Alertmanagers (an HA pair) or a retry can deliver out of order: the resolution of a period may
    come before the firing of that same period."""
    ended = T0 + timedelta(minutes=2)
    deliver(webhook, notification([alert(GPU_HOT, T0, ended)]))
    pending = [event.status for news in threads.pending() for event in news.events]
    assert deliver(webhook, notification([alert(GPU_HOT, T0)])) == {"recorded": 1, "duplicates": 0, "threads": [THREAD]}
    thread = threads.get(THREAD)
    assert (thread.status, thread.firing, thread.events) == ("resolved", 0, 2)
    assert [event.status for news in threads.pending() for event in news.events] == pending == ["resolved"]


@pytest.mark.parametrize(
    ("labels", "thread_labels", "key", "job", "namespace", "matchers"),
    [
        (GPU_HOT, ("namespace", "rayjob", "job"), THREAD, "llm-ft", "ml", {"rayjob": "llm-ft", "namespace": "ml"}),
        (
            {"alertname": "TargetDown", "namespace": "ml", "job": "train-a"},
            ("namespace", "rayjob", "job"),
            "ml/job=train-a",
            "train-a",
            "ml",
            {"rayjob": "", "job": "train-a", "namespace": "ml"},
        ),
        ({"alertname": "GPUHot", "rayjob": "x/y"}, ("rayjob",), "rayjob=x%2Fy", "x/y", "", {"rayjob": "x/y"}),
        (
            {"alertname": "NodeDown", "instance": "gpu-7:9400"},
            ("namespace", "rayjob", "job"),
            "alertname=NodeDown",
            "",
            "",
            {"alertname": "NodeDown", "rayjob": "", "job": ""},
        ),
    ],
    ids=["rayjob-wins-over-scrape-job", "job-when-no-rayjob", "configured-without-namespace", "unassigned"],
)
def test_which_thread_an_alert_goes_to(labels, thread_labels, key, job, namespace, matchers):
    thread = thread_for(labels, thread_labels)
    assert (thread.key, thread.job, thread.namespace, thread.matchers) == (key, job, namespace, matchers)


def test_alerts_without_a_job_label_share_one_thread_per_alertname(webhook, threads):
    node_down = [{"alertname": "NodeDown", "instance": f"gpu-{n}:9400"} for n in range(3)]
    body = notification([alert(labels, T0) for labels in node_down] + [alert({"alertname": "DiskFull"}, T0)])
    assert deliver(webhook, body)["threads"] == ["alertname=DiskFull", "alertname=NodeDown"]
    assert threads.get("alertname=NodeDown").alerts == 3


def test_a_very_long_label_value_still_makes_a_bounded_distinct_key():
    first = thread_for({"rayjob": "j" * 400 + "1"}, ("rayjob",))
    second = thread_for({"rayjob": "j" * 400 + "2"}, ("rayjob",))
    assert len(first.key) == len(second.key) == 255
    assert first.key != second.key


def with_alert(**changes: object) -> dict:
    """A notification whose one alert has `changes`, as a broken sender would write it."""
    return {**notification([alert(GPU_HOT, T0)]), "alerts": [{**alert(GPU_HOT, T0), **changes}]}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("{nope", "the body is not JSON"),
        ("[]", "the body is not a JSON object"),
        ({**notification([alert(GPU_HOT, T0)]), "version": "3"}, "version '3' is not '4'"),
        ({**notification([alert(GPU_HOT, T0)]), "alerts": []}, "`alerts` is missing or empty"),
        (
            {**notification([alert(GPU_HOT, T0)]), "status": "pending"},
            "status 'pending' is neither firing nor resolved",
        ),
        (with_alert(startsAt="yesterday"), "alerts[0].startsAt 'yesterday' is not"),
        (with_alert(startsAt="2026-11-22T09:30:00"), "is not an RFC 3339 time"),
        (with_alert(labels={"gpu": 3}), "alerts[0].labels is not an object of strings"),
        (with_alert(fingerprint=""), "alerts[0].fingerprint '' is not"),
        (
            {**notification([alert(GPU_HOT, T0)]), "alerts": [alert(GPU_HOT, T0), "an alert"]},
            "alerts[1] is not an object",
        ),
    ],
    ids=["not-json", "not-object", "version", "no-alerts", "status", "time", "naive-time", "labels", "fp", "alert"],
)
def test_a_malformed_body_is_a_400_saying_what_is_wrong_and_records_nothing(webhook, threads, body, error):
    data = body if isinstance(body, str) else json.dumps(body)
    answer = requests.post(webhook, data=data, timeout=10)
    assert answer.status_code == 400
    assert error in answer.json()["error"]
    assert threads.pending() == []


def test_the_body_needs_a_length_and_at_most_8_mib(webhook):
    huge = requests.post(webhook, data=b" " * (8 * 1024 * 1024 + 1), timeout=30)
    assert (huge.status_code, huge.json()["error"]) == (413, "the body is 8388609 bytes; at most 8388608 are taken")
    chunked = requests.post(webhook, data=iter([b"{}"]), timeout=10)  # a generator goes chunked, without a length
    assert (chunked.status_code, chunked.json()["error"]) == (411, "send a Content-Length")
    assert requests.get(webhook, timeout=10).status_code == 405


# --- the poster ------------------------------------------------------------------------------------------


def test_the_first_alert_opens_the_thread_later_ones_reply_and_resolution_edits_the_parent(
    webhook, threads, slack, settings
):
    opened: list[tuple[str, str, Post]] = []
    poster = alert_poster(slack, settings, threads, on_thread_opened=lambda *args: opened.append(args))
    deliver(webhook, notification([alert(GPU_HOT, T0, annotations={"summary": "GPU 3 at 92 C"})]))
    assert poster.round() == 2  # the parent, and its first reply
    parent = posted(slack)[0]
    assert parent.params["channel"] == CHANNEL
    assert texts(parent.params) == (
        ":red_circle: *Firing* · `ml/llm-ft` · GPUHot · since 2026-11-22 09:30:00 UTC\n"
        "\nAlertmanager alerts about rayjob `llm-ft` in namespace `ml`\n"
        "\nSilence 2h"
    )
    assert buttons(parent) == ["alert_silence"]
    assert parent.params["blocks"][-1]["elements"][0]["value"] == THREAD
    assert opened == [("llm-ft", "ml", Post(CHANNEL, parent.answer["ts"]))]

    first_reply = posted(slack)[1]
    assert first_reply.params["thread_ts"] == parent.answer["ts"]
    assert texts(first_reply.params) == (
        "*1 new* · 1 of 1 alerts firing\n"
        ":red_circle: `GPUHot` firing since 2026-11-22 09:30:00 UTC · GPU 3 at 92 C · job=dcgm-exporter, pod=llm-ft-w-1"
    )

    deliver(webhook, notification([alert(GPU_HOT, T0), alert(NCCL_STALL, T0 + timedelta(minutes=1))]))
    assert poster.round() == 2  # a new alert name: the parent says so, and one reply
    [edit] = slack.wait_for("chat.update")
    assert texts(edit.params).startswith(":red_circle: *Firing* · `ml/llm-ft` · GPUHot, NCCLStall")
    reply = posted(slack)[-1]
    assert reply.params["thread_ts"] == parent.answer["ts"]
    assert texts(reply.params).startswith("*1 new* · 2 of 2 alerts firing\n:red_circle: `NCCLStall` firing since")

    ended = T0 + timedelta(minutes=9)
    deliver(webhook, notification([alert(GPU_HOT, T0, ended), alert(NCCL_STALL, T0 + timedelta(minutes=1), ended)]))
    assert poster.round() == 2
    edit = slack.wait_for("chat.update", 2)[-1]
    assert (edit.params["channel"], edit.params["ts"]) == (CHANNEL, parent.answer["ts"])
    assert texts(edit.params).startswith(
        ":white_check_mark: *Resolved* · `ml/llm-ft` · GPUHot, NCCLStall · resolved 2026-11-22 09:39:00 UTC"
    )
    assert buttons(edit) == []
    assert texts(posted(slack)[-1].params).startswith("*2 new* · 0 of 2 alerts firing\n:white_check_mark: `GPUHot`")
    assert poster.round() == 0
    assert len(posted(slack)) == 4
    assert len(opened) == 1


def test_a_burst_for_one_job_is_one_reply(webhook, threads, slack, settings):
    poster = alert_poster(slack, settings, threads)
    deliver(webhook, notification([alert(GPU_HOT, T0)]))
    poster.round()
    pods = [{**GPU_HOT, "pod": f"llm-ft-w-{n}"} for n in range(2, 32)]
    deliver(webhook, notification([alert(labels, T0) for labels in pods]))
    before = len(posted(slack))
    poster.round()
    [reply] = posted(slack)[before:]
    shown = texts(reply.params)
    assert shown.startswith("*30 new* · 31 of 31 alerts firing")
    assert shown.count("\n:red_circle: ") == 20
    assert shown.endswith("… and 10 more; every event is in the state store")


def test_more_new_jobs_than_a_round_opens_get_one_digest(webhook, threads, slack, settings):
    poster = alert_poster(slack, settings, threads)
    for n in range(10):
        job = {**GPU_HOT, "rayjob": f"sweep-trial-{n}"}
        deliver(webhook, notification([alert(job, T0), alert({**job, "alertname": "NCCLStall"}, T0)]))
    assert poster.round() == 7  # three threads, the digest, the three threads' first replies
    parents, digest, replies = posted(slack)[:3], posted(slack)[3], posted(slack)[4:]
    assert [call.params["text"] for call in parents] == [
        f"Firing: ml/sweep-trial-{n}: GPUHot, NCCLStall" for n in range(3)
    ]
    shown = texts(digest.params)
    assert shown.startswith(":rotating_light: *14 new alerts for 7 more jobs*")
    assert "`ml/sweep-trial-9`: GPUHot (1), NCCLStall (1)" in shown
    assert [reply.params["thread_ts"] for reply in replies] == [parent.answer["ts"] for parent in parents]
    assert threads.pending() == []


def test_threads_survive_a_restart(webhook, threads, slack, settings):
    deliver(webhook, notification([alert(GPU_HOT, T0)]))
    alert_poster(slack, settings, threads).round()
    parent = posted(slack)[0]
    restarted = AlertThreads(settings.state_url(), settings.alert_thread_labels)
    deliver(webhook, notification([alert(NCCL_STALL, T0)]))
    alert_poster(slack, settings, restarted).round()
    assert [call.params.get("thread_ts") for call in posted(slack)] == [None, *[parent.answer["ts"]] * 2]
    assert "NCCLStall" in texts(posted(slack)[-1].params)


def test_events_stay_unposted_until_slack_takes_them(webhook, threads, slack, settings):
    slack.refusing["chat.postMessage"] = "channel_not_found"
    poster = alert_poster(slack, settings, threads)
    deliver(webhook, notification([alert(GPU_HOT, T0)]))
    assert poster.round() == 0
    assert [len(news.events) for news in threads.pending()] == [1]
    del slack.refusing["chat.postMessage"]
    assert poster.round() == 2
    assert threads.pending() == []
    assert [call.answer["ok"] for call in posted(slack)] == [False, True, True]  # refused, then parent and reply


def test_a_failing_hook_does_not_stop_the_thread_and_unassigned_threads_call_no_hook(webhook, threads, slack, settings):
    told = []

    def broken(job: str, namespace: str, post: Post) -> None:
        told.append(job)
        raise RuntimeError("diagnosis on fire")

    poster = alert_poster(slack, settings, threads, on_thread_opened=broken)
    deliver(webhook, notification([alert(GPU_HOT, T0)]))
    deliver(webhook, notification([alert({"alertname": "NodeDown", "instance": "gpu-7"}, T0)]))
    poster.round()
    assert told == ["llm-ft"]
    assert threads.pending() == []


def test_alert_text_pings_nobody(webhook, threads, slack, settings):
    loud = {**GPU_HOT, "rayjob": "<!channel>"}
    deliver(webhook, notification([alert(loud, T0, annotations={"summary": "<!here> & <@U02B>"})]))
    alert_poster(slack, settings, threads).round()
    shown = "\n".join(texts(call.params) + call.params["text"] for call in posted(slack))
    assert "<!channel>" not in shown and "<!here>" not in shown and "<@U02B>" not in shown
    assert "&lt;!here&gt; &amp; &lt;@U02B&gt;" in shown


# --- the Silence button without an Alertmanager ----------------------------------------------------------


@pytest.mark.parametrize(
    ("alertmanager_url", "said"),
    [
        (lambda: f"http://127.0.0.1:{free_port()}", "did not answer (ConnectionError), so nothing was silenced"),
        (lambda: "", "trainbot knows no Alertmanager to silence in: set TRAINBOT_ALERTMANAGER_URL"),
    ],
    ids=["down", "not-configured"],
)
def test_silence_without_an_alertmanager_tells_only_the_clicker(settings, slack, threads, alertmanager_url, said):
    settings = settings.model_copy(update={"alertmanager_url": alertmanager_url()})
    promotions = Promotions(settings)
    app = make_app(
        promotions, SlackRequestHandler(build_slack_app(Services(settings, promotions=promotions)).app), alerts=threads
    )
    with in_thread(make_server("127.0.0.1", 0, app)) as url:
        deliver(f"{url}/alerts/alertmanager", notification([alert(GPU_HOT, T0)]))
        alert_poster(slack, settings, threads).round()
        parent = posted(slack)[0]
        answer = post_signed(
            f"{url}/slack/events", SECRET, button_click_body(slack, "alert_silence", THREAD, "U01A", parent)
        )
        assert answer.status_code == 200
        [ephemeral] = slack.wait_for("chat.postEphemeral")
    assert (ephemeral.params["user"], ephemeral.params["channel"]) == ("U01A", CHANNEL)
    assert said in ephemeral.params["text"]
    assert threads.get(THREAD).silence_id is None
    assert len(posted(slack)) == 2  # the parent and its reply; nothing said in the thread


# --- the storm -------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_an_alert_storm_is_recorded_in_full_and_reaches_slack_paced_and_summed_up(webhook, threads, slack, settings):
    """500 alerts in 10 s (100 jobs, 5 alerts each, one group per job every 0.1 s, as Alertmanager sends
    them), with the real poster loop and its real pacing."""
    poster = AlertPoster(poster_for(slack, settings, paced=True), threads, CHANNEL, silenceable=True)
    stop = start_alert_poster(poster)
    started = time.monotonic()
    try:
        for n in range(100):
            job = {"namespace": "sweeps", "rayjob": f"trial-{n:03}"}
            names = ("GPUHot", "NCCLStall", "XidError", "DataloaderSlow", "OOMRisk")
            deliver(webhook, notification([alert({**job, "alertname": name}, T0) for name in names]))
            time.sleep(max(0.0, started + 0.1 * (n + 1) - time.monotonic()))
        storm_s = time.monotonic() - started
        assert storm_s < 11
        deadline = time.monotonic() + 60
        while threads.pending() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
    assert threads.pending() == []
    assert sum(threads.get(f"sweeps/rayjob=trial-{n:03}").events for n in range(100)) == 500

    sent = [call for call in slack.calls if call.method in ("chat.postMessage", "chat.update")]
    assert all(call.params["channel"] == CHANNEL for call in sent)
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(sent)]
    assert min(gaps) > 0.9, gaps  # about one a second in the channel
    assert len(sent) <= 30, len(sent)  # a few dozen at most: not one per alert, nor one per job
    # Every alert and every job reached Slack: in a thread of its own, or counted in a digest.
    parents = [call for call in sent if call.method == "chat.postMessage" and "thread_ts" not in call.params]
    opened = {call.params["text"].split(": ")[1] for call in parents if call.params["text"].startswith("Firing: ")}
    digests = [call.params["text"] for call in parents if "too many for a thread each" in call.params["text"]]
    assert digests
    counted = [re.match(r"(\d+) new alerts for (\d+) more jobs", digest).groups() for digest in digests]
    assert len(opened) + sum(int(jobs) for _, jobs in counted) == 100
    replies = [re.match(r".*: (\d+) new,", call.params["text"]) for call in sent if "thread_ts" in call.params]
    assert sum(int(reply.group(1)) for reply in replies) + sum(int(alerts) for alerts, _ in counted) == 500


def test_trainbot_serve_posts_an_alert_thread_and_says_in_it_why_the_job_has_no_diagnosis(
    slack, tmp_path, state_store_url
):
    """start_everything wires the alert poster to the bot's diagnoses: a job no backend here runs gets a line
    saying so in its thread, not silence."""
    settings = slack_settings(tmp_path, slack, alerts_channel=CHANNEL, state_store_url=state_store_url)
    app, bot = start_everything(Services(settings))
    assert bot is not None
    with serving_locally(app) as url:
        deliver(f"{url}/alerts/alertmanager", notification([alert(GPU_HOT, T0)]))
        parent = slack.wait_for("chat.postMessage")[0]
        assert parent.params["channel"] == CHANNEL and "GPUHot" in parent.params["text"]
        deadline = time.monotonic() + 30
        while not (said := [c for c in posted(slack) if c.params.get("text", "").startswith("No diagnosis of llm-ft")]):
            assert time.monotonic() < deadline, [call.params.get("text") for call in posted(slack)]
            time.sleep(0.2)
    [reply] = said
    assert reply.params["thread_ts"] == parent.answer["ts"]
    assert "no local Ray head answers" in reply.params["text"]


def test_two_trainbot_serves_on_one_state_store_open_a_thread_once(slack, tmp_path, state_store_url):
    """Two replicas behind one Service, as deploy/'s prod overlay runs them on PostgreSQL: Alertmanager's
    HA pair sends each of them the same notification, and the alerts channel gets one thread with one
    reply, however their poster rounds interleave."""
    bodies = [notification([alert(GPU_HOT, T0), alert(NCCL_STALL, T0)])] * 2
    with ExitStack() as bots:
        urls = []
        for replica in ("a", "b"):
            port, folder = free_port(), tmp_path / replica
            folder.mkdir()
            env = serve_env(slack, folder, alerts_channel=CHANNEL, state_store_url=state_store_url)
            url = f"http://127.0.0.1:{port}"
            bots.enter_context(
                serving([str(TRAINBOT), "serve", "--port", str(port)], folder / "serve.log", f"{url}/healthz", env)
            )
            urls.append(url)
        receipts = [deliver(f"{url}/alerts/alertmanager", body) for url, body in zip(urls, bodies, strict=True)]
        parent = slack.wait_for("chat.postMessage")[0]
        deadline = time.monotonic() + 30
        while not [call for call in posted(slack) if call.params.get("text", "").startswith("No diagnosis of")]:
            assert time.monotonic() < deadline, [call.params.get("text") for call in posted(slack)]
            time.sleep(0.2)
        time.sleep(3 * POLL_S)  # rounds of both posters, each of which could post again
    assert sorted((receipt["recorded"], receipt["duplicates"]) for receipt in receipts) == [(0, 2), (2, 0)]
    parents = [call for call in posted(slack) if "thread_ts" not in call.params]
    assert [call.params["text"] for call in parents] == ["Firing: ml/llm-ft: GPUHot, NCCLStall"]
    replies = [call for call in posted(slack) if call.params.get("thread_ts") == parent.answer["ts"]]
    said = sorted(texts(call.params) for call in replies)
    assert len(said) == 2 and said[0].startswith("*2 new* · 2 of 2 alerts firing"), said
    assert said[1].startswith("No diagnosis of llm-ft"), said
