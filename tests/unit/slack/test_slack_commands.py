"""/train and /model through the real slack-bolt App over HTTP: requests signed as Slack signs them, the
bot's replies caught by a local Slack stand-in (response_url and Web API)."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from slack_bolt.adapter.wsgi import SlackRequestHandler

from actions.errors import Unavailable
from actions.jobs.backends.local_head import dashboard_url, head_running
from actions.jobs.job import JobState
from actions.jobs.records import Store
from actions.promotions.service import Promotions
from actions.promotions.store import PromotionStore
from actions.settings import Settings
from bot.commands.grammar import TRAIN_VERBS
from bot.console.local_slack import (
    Call,
    button_click_payload,
    post_signed,
    signed_headers,
    slash_command_body,
)
from bot.http.metrics import Metrics
from bot.services import Services
from bot.slack.app import build_slack_app
from bot.slack.lanes import train_lane
from bot.slack.listeners.train import TRAIN_ANSWERS
from bot.web.app import make_app
from tests.builders.job_records import launched
from tests.builders.step_files import RUN_A, RUN_B, record_two_runs
from tests.paths import TRAINBOT
from tests.servers.processes import free_port, serving
from tests.standins.slack_bot import SECRET, command, serve_env, serving_in_thread, texts
from tests.standins.slack_standin import SlackStandIn


@pytest.fixture
def promotions(settings: Settings) -> Promotions:
    return Promotions(settings)


@pytest.fixture
def bot(settings: Settings, promotions: Promotions) -> Iterator[str]:
    yield from serving_in_thread(
        make_app(promotions, SlackRequestHandler(build_slack_app(Services(settings, promotions=promotions)).app))
    )


def test_the_app_checks_its_token_on_start(slack, bot):
    assert [call.method for call in slack.calls] == ["auth.test"]
    assert slack.calls[0].params == {}


def test_train_help_lists_the_verbs_and_the_templates_parameters(bot, slack):
    reply = command(bot, slack, "/train", "help")
    assert reply["response_type"] == "ephemeral"
    shown = texts(reply)
    assert "`/train status [--wait] JOB`" in shown
    assert "`lr=0.003` (float, min 1e-06, max 1) learning rate" in shown
    assert "`strategy=ddp` (choice, ddp | fsdp)" in shown
    assert "--as" not in shown
    assert command(bot, slack, "/train", "")["blocks"] == reply["blocks"]


def test_train_help_offers_a_scaling_study_without_the_terminal_s_options(bot, slack):
    shown = texts(command(bot, slack, "/train", "help"))
    assert (
        "`/train scale --workers N,N,... [--gpus GPUS] [--batch {per-worker,global}] [--steps STEPS] [--parallel] "
        "TEMPLATE [key=value ...] [TEMPLATE [key=value ...] ...]`"
    ) in shown
    assert "a scaling study: a template at several sizes, its speedup and efficiency" in shown


def test_train_help_offers_diagnose_of_a_job_not_of_a_bundle_path(bot, slack):
    shown = texts(command(bot, slack, "/train", "help"))
    assert "`/train diagnose JOB`" in shown
    assert "diagnose a job live and post the diagnosis in its thread" in shown
    assert "PATH" not in shown
    assert "bundle" not in shown


def test_every_train_verb_of_the_grammar_has_its_answer():
    assert list(TRAIN_ANSWERS) == list(TRAIN_VERBS)


def test_every_train_verb_but_help_waits_in_the_lane_of_the_backend_it_calls():
    # A verb with no lane would run outside the bulkhead: a slow backend could take every worker.
    assert [verb for verb in TRAIN_VERBS if train_lane({"text": f"{verb} x"}) is None] == ["help"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "status",
            ":warning: /train status: the following arguments are required: JOB\nusage: /train status [--wait] JOB",
        ),
        ("launch tiny-transformer --as U02B", ":warning: /train: in Slack you act as yourself; drop --as"),
        ("launch tiny-transformer --a U02B", ":warning: /train: unrecognized arguments: --a U02B"),
        (
            "reboot",
            ":warning: /train reboot: unknown; "
            "/train takes launch, sweep, scale, status, logs, cancel, diagnose, compare, jobs, help",
        ),
        ("status 'unclosed", ":warning: /train: No closing quotation (close the quote)"),
        ("x" * 4001, ":warning: /train: the text is 4001 characters; at most 4000 are read"),
    ],
)
def test_a_mistake_gets_an_ephemeral_message_saying_what_to_do(bot, slack, text, message):
    reply = command(bot, slack, "/train", text)
    assert reply["response_type"] == "ephemeral"
    assert texts(reply).startswith(message)


def test_user_text_cannot_ping_the_channel_or_break_out_of_its_string(bot, slack):
    reply = command(bot, slack, "/model", 'history "<!channel> \\" & <@U02B>"')
    shown = texts(reply)
    assert "<!channel>" not in shown and "<@U02B>" not in shown
    assert '&lt;!channel&gt; " &amp; &lt;@U02B&gt;' in shown


def test_jobs_lists_what_was_launched(bot, slack, settings):
    store = Store(settings.state_url())
    store.create_schema()
    launched(store, "tiny-transformer-abc123", requester="U01ALICE", state=JobState.RUNNING)
    shown = texts(command(bot, slack, "/train", "jobs"))
    assert "*Jobs*, newest first (1)" in shown
    assert "`tiny-transformer-abc123`  *RUNNING*  tiny-transformer on local, by <@U01ALICE>" in shown


def test_compare_posts_the_two_runs_in_the_channel_and_their_chart_in_its_thread(bot, slack, settings):
    store = Store(settings.state_url())
    store.create_schema()
    record_two_runs(store, settings.data_dir)
    reply = command(bot, slack, "/train", "compare tiny-transformer-a tiny-transformer-b")
    assert texts(reply) == f"Compared {RUN_A} with {RUN_B}: posted in this channel, the step-time chart in its thread."
    [posted] = slack.wait_for("chat.postMessage")
    assert posted.params["channel"] == "C0ML"
    shown = texts(posted.params)
    assert f"*{RUN_A} (A) against {RUN_B} (B)*" in shown
    assert "verdict            compute-bound            comm-bound" in shown
    assert "parameters: 1 differ (strategy ddp -&gt; fsdp); 1 the same" in shown
    uploading = ("files.getUploadURLExternal", "upload_url", "files.completeUploadExternal")
    [asked], [uploaded], [completed] = (slack.wait_for(method) for method in uploading)
    assert asked.params["filename"] == f"compare-{RUN_A}-{RUN_B}.png"
    assert uploaded.params["content"].startswith(b"\x89PNG\r\n\x1a\n")
    assert (completed.params["channel_id"], completed.params["thread_ts"]) == ("C0ML", posted.answer["ts"])
    slack.check_within_limits()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "compare a b --chart c.png",
            ":warning: /train: in Slack the chart is posted with the result; drop --chart",
        ),
        (
            f"compare {RUN_A} {RUN_A}",
            f":warning: {RUN_A} and {RUN_A} are the same run ({RUN_A}); name two different runs",
        ),
        ("compare tiny-transformer-a nosuchjob", ":warning: no job named or starting with 'nosuchjob'"),
    ],
)
def test_a_compare_mistake_is_one_ephemeral_line_and_posts_nothing(bot, slack, settings, text, message):
    store = Store(settings.state_url())
    store.create_schema()
    record_two_runs(store, settings.data_dir)
    reply = command(bot, slack, "/train", text)
    assert reply["response_type"] == "ephemeral"
    assert texts(reply).startswith(message)
    assert not [call for call in slack.calls if call.method == "chat.postMessage" or call.method.startswith("files.")]


def test_status_without_a_ray_head_says_so_and_starts_none(bot, slack, settings):
    shown = texts(command(bot, slack, "/train", "status nosuchjob"))
    assert shown == (
        f":warning: no local Ray head answers at http://127.0.0.1:{settings.local_dashboard_port}, "
        "so it has no job 'nosuchjob'; "
        "`trainbot jobs` lists what was launched, and a launch starts the head"
    )
    assert not head_running(dashboard_url(settings))


def test_model_requests_and_history_show_the_store(bot, slack, settings):
    store = PromotionStore(settings.state_url())
    request = store.create(model="tiny-transformer", version=3, target="staging", kind="promote",
                           requester="U01ALICE", approvals_needed=1, expires_in=timedelta(hours=24),
                           at=datetime.now(UTC))  # fmt: skip
    shown = texts(command(bot, slack, "/model", "requests --open"))
    assert f"`{request.id}  tiny-transformer v3 -&gt; staging  pending`  (0/1 approvals; asked by <@U01ALICE>)" in shown
    history = texts(command(bot, slack, "/model", "history tiny-transformer"))
    assert f"{request.id}  staging v3  promote` (<@U01ALICE>)  `v3 to staging`" in history


def test_launching_is_refused_until_a_channel_is_listed_for_it(bot, slack):
    for verb in ("launch tiny-transformer", "sweep tiny-transformer --trials 2 lr=uniform(0.001,0.01)"):
        assert texts(command(bot, slack, "/train", verb)) == (
            f":warning: {verb.split()[0]} is allowed in no channel yet: ask whoever runs trainbot to add this one "
            f"(C0ML) to slack_commands.{verb.split()[0]}.channels in the config"
        )
    assert slack.wait_for("response_url", 2)  # nothing was posted in the channel
    assert not [call for call in slack.calls if call.method == "chat.postMessage"]


def test_a_manifest_or_a_backend_is_the_terminal_s_business(bot, slack):
    assert texts(command(bot, slack, "/train", "launch --manifest /etc/passwd")) == (
        ":warning: /train: a manifest is a file on your machine: run `trainbot launch --manifest FILE` in a terminal"
    )
    assert texts(command(bot, slack, "/train", "launch tiny-transformer --backend=kuberay")).startswith(
        ":warning: /train: Slack launches on the bot's backend (TRAINBOT_BACKEND)"
    )


@pytest.fixture
def governed(settings: Settings, slack: SlackStandIn) -> Iterator[str]:
    """A bot whose config lets C0ML launch, and lets only U02B and the group S0READERS read logs."""
    slack.usergroups = {"S0READERS": ["U03CAROL"]}
    settings = settings.model_copy(
        update={
            "slack_commands": {"launch": {"channels": ["C0ML"]}, "logs": {"users": ["U02B"], "groups": ["S0READERS"]}}
        }
    )
    promotions = Promotions(settings)
    yield from serving_in_thread(
        make_app(promotions, SlackRequestHandler(build_slack_app(Services(settings, promotions=promotions)).app))
    )


def test_a_dry_run_in_an_allowed_channel_shows_what_would_be_submitted(governed, slack):
    shown = texts(command(governed, slack, "/train", "launch tiny-transformer lr=0.01 --dry-run"))
    assert shown.startswith("*Would submit tiny-transformer-")
    assert "--lr 0.01" in shown and "TRAINBOT_JOB" in shown
    assert texts(command(governed, slack, "/train", "launch tiny-transformer --dry-run", channel="C0OTHER")) == (
        ":warning: launch is allowed only in C0ML"
    )
    assert texts(command(governed, slack, "/train", "cancel some-job", channel="C0OTHER")) == (
        ":warning: cancel is allowed only in C0ML"  # cancel follows launch's rule
    )


def test_a_rule_with_users_and_groups_lets_only_those_read(governed, slack):
    refused = ":warning: you may not logs here: slack_commands.logs in the config lists who may"
    assert texts(command(governed, slack, "/train", "logs some-job", user="U01ALICE")) == refused
    for reader in ("U02B", "U03CAROL"):  # listed, and in the listed group
        assert texts(command(governed, slack, "/train", "logs some-job", user=reader)) != refused
    assert texts(command(governed, slack, "/train", "jobs", user="U01ALICE")).startswith("*Jobs*")


def test_an_unexpected_failure_answers_an_incident_id_and_logs_the_traceback(settings, slack, caplog):
    class Broken(Promotions):
        def requests(self, **_: object) -> list:
            raise RuntimeError("database on fire")

    for bot in serving_in_thread(
        make_app(
            Broken(settings), SlackRequestHandler(build_slack_app(Services(settings, promotions=Broken(settings))).app)
        )
    ):
        shown = texts(command(bot, slack, "/model", "requests"))
    assert shown.startswith(":warning: trainbot failed on this; incident ")
    assert "database on fire" not in shown
    assert "database on fire" in caplog.text


def test_a_click_the_bot_cannot_read_is_acked_and_its_failure_logged(bot, slack, caplog):
    posted = Call("chat.postMessage", {"text": "request"}, {"channel": "C0ML", "ts": "1.000001"})
    payload = button_click_payload(slack, "promotion_approve", "req-1", "U02BOB", posted)
    del payload["channel"]  # not what Slack sends; the work reads it before it can tell anyone
    body = urllib.parse.urlencode({"payload": json.dumps(payload)})
    answer = post_signed(bot, SECRET, body)
    assert (answer.status_code, answer.text) == (200, "")
    deadline = time.monotonic() + 10
    while "work behind a Slack ack failed on a block_actions payload" not in caplog.text:
        assert time.monotonic() < deadline, caplog.text
        time.sleep(0.05)
    assert "KeyError: 'channel'" in caplog.text
    assert [call.method for call in slack.calls] == ["auth.test"]


@pytest.mark.parametrize(
    "headers",
    [
        lambda body: {},
        lambda body: signed_headers("not-the-secret", body),
        lambda body: signed_headers(SECRET, body, timestamp=int(time.time()) - 6 * 60),
        lambda body: {**signed_headers(SECRET, body), "X-Slack-Request-Timestamp": str(int(time.time()) + 1)},
    ],
    ids=["unsigned", "forged", "stale", "timestamp-changed"],
)
def test_requests_slack_did_not_sign_get_401_and_run_nothing(bot, slack, headers):
    body = slash_command_body(slack, "/train", "help")
    answer = requests.post(bot, data=body.encode(), headers=headers(body), timeout=10)
    assert answer.status_code == 401
    time.sleep(0.5)
    assert [call.method for call in slack.calls] == ["auth.test"]


def test_without_slack_settings_the_route_says_what_to_set(promotions):
    for url in serving_in_thread(make_app(promotions)):
        answer = requests.post(url, data=b"x", timeout=10)
    assert (answer.status_code, answer.json()) == (
        503,
        {"error": "Slack is not configured: set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN"},
    )


def test_a_token_slack_refuses_or_an_unreachable_slack_is_one_clear_error(settings, promotions):
    closed = settings.model_copy(update={"slack_api_url": f"http://127.0.0.1:{free_port()}/api/"})
    with pytest.raises(
        Unavailable, match=r"did not accept SLACK_BOT_TOKEN .*check the token, and TRAINBOT_SLACK_API_URL"
    ):
        build_slack_app(Services(closed, promotions=promotions))


def test_trainbot_serve_answers_slack_from_its_environment(slack, tmp_path):
    port = free_port()
    env = serve_env(slack, tmp_path)
    url = f"http://127.0.0.1:{port}"
    with serving([str(TRAINBOT), "serve", "--port", str(port)], tmp_path / "serve.log", f"{url}/healthz", env):
        reply = command(f"{url}/slack/events", slack, "/model", "help")
    assert texts(reply).startswith("/model\n`/model promote NAME VERSION TARGET`")


def test_metrics_count_requests_ack_latency_errors_and_the_queue(settings, slack):
    class Broken(Promotions):
        def requests(self, **_: object) -> list:
            raise RuntimeError("database on fire")

    metrics = Metrics()
    broken = Broken(settings)
    app = make_app(
        broken, SlackRequestHandler(build_slack_app(Services(settings, promotions=broken), metrics).app), metrics
    )
    for bot in serving_in_thread(app):
        command(bot, slack, "/train", "help")
        command(bot, slack, "/model", "requests")
        base = bot.removesuffix("/slack/events")
        requests.get(f"{base}/no/such/path", timeout=10)
        scraped = requests.get(f"{base}/metrics", timeout=10)
    assert scraped.headers["Content-Type"].startswith("text/plain")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
    }
    assert samples[("trainbot_http_requests_total", (("route", "/slack/events"), ("status", "200")))] == 2
    assert samples[("trainbot_http_requests_total", (("route", "other"), ("status", "404")))] == 1
    assert samples[("trainbot_slack_ack_seconds_count", ())] == 2
    assert samples[("trainbot_errors_total", (("where", "slack"),))] == 1
    assert samples[("trainbot_work_queue_depth", ())] == 0


def test_diagnose_in_slack_takes_a_job_never_a_path_on_the_bot_s_machine(bot, slack):
    assert texts(command(bot, slack, "/train", "diagnose /etc/passwd")) == (
        ":warning: /etc/passwd: name a job here; for a bundle file run `trainbot diagnose /etc/passwd` in a terminal"
    )


def test_diagnosing_where_no_backend_answers_says_so_to_the_one_who_asked(bot, slack):
    assert texts(command(bot, slack, "/train", "diagnose nosuchjob")) == (
        "Diagnosing nosuchjob: collecting its evidence; the diagnosis follows in this channel."
    )
    [told] = slack.wait_for("chat.postEphemeral")
    assert told.params["user"] == "U01ALICE" and told.params["channel"] == "C0ML"
    assert told.params["text"].startswith("no local Ray head answers at http://127.0.0.1:")
