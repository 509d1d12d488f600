"""Jobs launched from Slack on the real local Ray head: each gets a thread that the bot's own watcher keeps
up to date; a sweep's progress message and its results with "Promote best to staging"."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slack_bolt.adapter.wsgi import SlackRequestHandler

from actions.jobs.job import JobState
from actions.promotions.service import Promotions
from actions.settings import Settings
from bot.console.local_slack import Call, button_click_body, post_signed
from bot.services import Services
from bot.slack.app import SlackBot, build_slack_app
from bot.slack.job_watcher import start_job_watcher
from bot.web.app import make_app
from tests.standins.slack_bot import SECRET, command, edits_of, serving_in_thread, texts
from tests.standins.slack_standin import SlackStandIn

pytestmark = pytest.mark.integration

ALICE, BOB = "U01ALICE", "U02B"
CHANNEL = "C0ML"
JOB_S = 240.0


@pytest.fixture
def ray_bot_settings(ray_settings: Settings, tmp_path: Path, slack: SlackStandIn) -> Settings:
    """The session's Ray head and MLflow store; a state store of this test's own."""
    return Settings(
        **{
            **ray_settings.model_dump(),
            "state_store_url": f"sqlite:///{tmp_path / 'state.db'}",
            "slack_bot_token": "xoxb-test",
            "slack_signing_secret": SECRET,
            "slack_api_url": slack.api_url,
            "slack_commands": {"launch": {"channels": [CHANNEL]}, "sweep": {"channels": [CHANNEL]}},
            "promotion": {"targets": {"staging": {"approvers": [BOB]}}},
            # A team template whose script really fails: a shape mismatch inside torch.
            "templates": {
                "broken": {"entrypoint": ["python", "-c", "import torch; torch.zeros(2, 3) @ torch.zeros(2, 3)"]}
            },
        }
    )


@pytest.fixture
def slack_bot(ray_bot_settings: Settings) -> SlackBot:
    return build_slack_app(Services(ray_bot_settings))


@pytest.fixture
def bot(ray_bot_settings: Settings, slack_bot: SlackBot) -> Iterator[str]:
    yield from serving_in_thread(make_app(Promotions(ray_bot_settings), SlackRequestHandler(slack_bot.app)))


def launched(bot: str, slack: SlackStandIn, text: str) -> tuple[str, Call]:
    """Launch from Slack; the job's name and the message that heads its thread."""
    reply = texts(command(bot, slack, "/train", text, channel=CHANNEL))
    assert reply.startswith("Launched ") and reply.endswith("; its thread in this channel follows it."), reply
    job = reply.split()[1].rstrip(";")
    parent = next(call for call in slack.wait_for("chat.postMessage") if call.params["text"].startswith(f"{job}:"))
    return job, parent


def wait_for_reply(slack: SlackStandIn, parent: Call, fragment: str, timeout_s: float = JOB_S) -> Call:
    """The first reply in `parent`'s thread whose text holds `fragment`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for call in slack.calls:
            if call.params.get("thread_ts") == parent.answer["ts"] and fragment in call.params.get("text", ""):
                return call
        time.sleep(0.5)
    shown = [call.params.get("text") for call in slack.calls if call.params.get("thread_ts") == parent.answer["ts"]]
    raise AssertionError(f"no reply with {fragment!r} in the thread within {timeout_s} s; the thread: {shown}")


def test_a_launch_gets_a_thread_that_follows_the_job_even_when_someone_asked_for_its_status_first(
    bot, slack, slack_bot
):
    job, parent = launched(bot, slack, "launch tiny-transformer epochs=1 steps_per_epoch=5 --workers 1")
    assert parent.params["channel"] == CHANNEL
    assert f"{job}: PENDING" == parent.params["text"]
    jobs = slack_bot.train.jobs()
    # Someone follows it by hand first: each status they read is recorded, the watcher is not running yet.
    while not (status := jobs.status(job)).state.terminal:
        time.sleep(1)
    assert status.state == JobState.SUCCEEDED

    stop = start_job_watcher(jobs, slack_bot.train.threads())
    try:
        finished = wait_for_reply(slack, parent, "is SUCCEEDED")
        time.sleep(6)  # another window of the watcher: the same state is not told twice
    finally:
        stop.set()
    assert finished.params["channel"] == CHANNEL
    assert [call for call in slack.calls if "is SUCCEEDED" in call.params.get("text", "")] == [finished]
    assert edits_of(slack, parent)[-1] == f"{job}: SUCCEEDED"

    # Diagnosed on request: the diagnosis and its chart (the ranks' step phases) go in the job's thread.
    assert texts(command(bot, slack, "/train", f"diagnose {job[:-2]}", channel=CHANNEL)) == (
        f"Diagnosing {job}: collecting its evidence; the diagnosis follows in its thread."
    )
    diagnosis = wait_for_reply(slack, parent, f"Diagnosis of {job}: ", timeout_s=120)
    assert "Show evidence" in json.dumps(diagnosis.params["blocks"])
    # The chart is the first file; each runbook's page follows its message.
    completed = slack.wait_for("files.completeUploadExternal")[0]
    assert completed.params["thread_ts"] == parent.answer["ts"]
    upload = next(call for call in slack.calls if call.method == "upload_url")
    assert upload.params["content"].startswith(b"\x89PNG")


def test_a_job_that_fails_gets_its_diagnosis_in_its_thread_unasked(bot, slack, slack_bot):
    job, parent = launched(bot, slack, "launch broken")
    stop = start_job_watcher(slack_bot.train.jobs(), slack_bot.train.threads())
    try:
        failed = wait_for_reply(slack, parent, "is FAILED")
        diagnosis = wait_for_reply(slack, parent, f"Diagnosis of {job}: failed", timeout_s=120)
    finally:
        stop.set()
    assert len(failed.params["text"]) < 400  # Ray's message holds the log; the thread shows its first line
    shown = json.dumps(diagnosis.params["blocks"])
    assert "RuntimeError" in shown or "mat1 and mat2" in shown, shown


def test_a_sweep_shows_its_progress_and_ends_with_its_results_and_a_promote_button(bot, slack, slack_bot):
    job, parent = launched(
        bot, slack,
        "sweep tiny-transformer --trials 2 lr=loguniform(1e-3,1e-2) epochs=1 steps_per_epoch=5 batch_size=16 "
        "d_model=32 layers=1",
    )  # fmt: skip
    progress = next(call for call in slack.wait_for("chat.postMessage", 2) if call.params.get("thread_ts"))
    assert progress.params["text"] == f"{job}: waiting for its first trial"
    stop = start_job_watcher(slack_bot.train.jobs(), slack_bot.train.threads())
    try:
        results = wait_for_reply(slack, parent, f"{job}: 2 of 2 trials finished")
    finally:
        stop.set()
    assert "; best tiny-transformer v" in results.params["text"]
    assert edits_of(slack, progress)[-1].startswith(f"{job}: 2/2 trials done, 0 running, best val_loss ")
    [buttons] = [block for block in results.params["blocks"] if block["type"] == "actions"]
    promote, diagnose = buttons["elements"]
    assert (promote["text"]["text"], diagnose["text"]["text"], diagnose["value"]) == (
        "Promote best to staging",
        "Diagnose",
        job,
    )
    offer = json.loads(promote["value"])
    assert (offer["model"], offer["target"]) == ("tiny-transformer", "staging")

    asked = len(slack.wait_for("chat.postMessage"))
    clicked = post_signed(bot, SECRET, button_click_body(slack, promote["action_id"], promote["value"], ALICE, results))
    assert clicked.status_code == 200
    request = slack.wait_for("chat.postMessage", asked + 1)[-1]
    assert request.params["text"] == f"promote tiny-transformer v{offer['version']} to staging: waiting for approval"
    assert f"<@{BOB}>" in json.dumps(request.params["blocks"])
