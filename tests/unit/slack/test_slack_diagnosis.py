"""A diagnosis posted to Slack and its "Show evidence" button, over HTTP: the poster against the local Slack
(messages, and the chart through files_upload_v2's three steps), the click signed as Slack signs it and
answered by the real Bolt app, which diagnoses the shelved bundle again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actions.evidence.bundle_shelf import BundleShelf
from actions.settings import Settings
from actions.state.posts import Post, SlackPosts
from bot.console.local_slack import Call, button_click_body, post_signed
from bot.render.blocks import notice
from bot.render.charts import diagnosis_chart
from bot.slack.listeners.diagnosis import GONE, post_diagnosis
from bot.slack.poster import ChannelPacer, SlackPoster, paced_client
from diagnosers.engine import diagnose_path
from tests.builders.hostile_bundle import hostile_bundle
from tests.paths import EXAMPLES
from tests.standins.slack_bot import SECRET, serving_bot, texts
from tests.standins.slack_standin import SlackStandIn

CHANNEL, ALICE = "C0ML", "U01ALICE"
PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"

# Settings that point the bot at the local Slack (tests/conftest.py): the slash commands' fixture.


@pytest.fixture
def bot(settings: Settings) -> Iterator[str]:
    yield from serving_bot(settings)


@pytest.fixture
def poster(settings: Settings, slack: SlackStandIn) -> Iterator[SlackPoster]:
    posts = SlackPosts(settings.state_url())
    posts.create_schema()
    # Unpaced, so a test posting a thread's worth of messages does not wait a second for each.
    yield SlackPoster(paced_client("xoxb-test", slack.api_url, timeout_s=10), posts, ChannelPacer(interval_s=0))
    posts.close()


def shelve_and_post(
    settings: Settings, poster: SlackPoster, example: Path, thread: Post | None, base: str = ""
) -> tuple[str, Path]:
    """Keep the bundle on the shelf and post its diagnosis the way the bot does; the key and the kept folder."""
    shelf = BundleShelf.of(settings)
    key = shelf.keep(example, "Straggler job")
    kept = shelf.find(key)
    assert kept is not None
    post_diagnosis(poster, CHANNEL, thread, diagnose_path(kept), kept,
                   job="straggler-job", runbook_base_url=base, evidence_key=key)  # fmt: skip
    return key, kept


def posts(slack: SlackStandIn) -> list[Call]:
    return [call for call in slack.calls if call.method == "chat.postMessage"]


def test_a_diagnosis_in_a_thread_brings_its_chart_and_runbooks_into_that_thread(settings, poster, slack):
    alert = poster.post(CHANNEL, notice("straggler-job is slow"))
    key, kept = shelve_and_post(settings, poster, EXAMPLES / "straggler-throttled-gpu", thread=alert)
    assert key.startswith("straggler-job-") and (kept / "steps" / "rank-5.jsonl").is_file()

    _, diagnosis, straggler_runbook, comm_runbook = posts(slack)
    assert diagnosis.params["thread_ts"] == alert.ts
    assert texts(diagnosis.params).startswith(":hourglass_flowing_sand: *Diagnosis* of `straggler-job`: *comm-bound*")
    assert [block["elements"][0]["value"] for block in diagnosis.params["blocks"] if block["type"] == "actions"] == [
        key
    ]
    assert {straggler_runbook.params["text"], comm_runbook.params["text"]} == {
        "Runbook: One rank is slower than the rest",
        "Runbook: Step time dominated by communication",
    }
    assert {call.params["thread_ts"] for call in (straggler_runbook, comm_runbook)} == {alert.ts}

    # files_upload_v2 as Slack serves it: ask for an upload URL, POST the bytes there, complete into the thread.
    # The chart first, then each runbook's whole page after its message.
    asked, *runbooks_asked = slack.wait_for("files.getUploadURLExternal", 3)
    uploaded, *runbooks_uploaded = slack.wait_for("upload_url", 3)
    completed, *runbooks_completed = slack.wait_for("files.completeUploadExternal", 3)
    chart = diagnosis_chart(kept)
    assert uploaded.params == {"file_id": asked.answer["file_id"], "content": chart}
    assert (asked.params["filename"], int(asked.params["length"])) == ("straggler-job-diagnosis.png", len(chart))
    assert (completed.params["channel_id"], completed.params["thread_ts"]) == (CHANNEL, alert.ts)
    assert completed.answer["files"] == [
        {"id": asked.answer["file_id"], "name": "straggler-job-diagnosis.png", "title": "Diagnosis of straggler-job",
         "size": len(chart)}
    ]  # fmt: skip
    order = [call.method for call in slack.calls]
    assert order.index("files.getUploadURLExternal") < order.index("upload_url")
    assert order.index("upload_url") < order.index("files.completeUploadExternal")

    pages = [(call.answer["files"][0]["name"], call.answer["files"][0]["title"]) for call in runbooks_completed]
    assert pages == [
        ("straggler.md", "Runbook: One rank is slower than the rest"),
        ("comm-bound.md", "Runbook: Step time dominated by communication"),
    ]
    for (name, _), sent in zip(pages, runbooks_uploaded, strict=True):
        assert sent.params["content"] == (PLAYBOOKS / name).read_bytes()
    assert {(call.params["channel_id"], call.params["thread_ts"]) for call in runbooks_completed} == {
        (CHANNEL, alert.ts)
    }
    assert slack.calls.index(straggler_runbook) < slack.calls.index(runbooks_asked[0])
    assert slack.calls.index(runbooks_completed[0]) < slack.calls.index(comm_runbook)
    slack.check_within_limits()


def test_without_a_thread_the_diagnosis_starts_one_and_with_runbook_links_posts_no_runbook_text(
    settings, poster, slack
):
    shelve_and_post(settings, poster, EXAMPLES / "failed-gpu-oom", thread=None, base="https://runbooks.example/pb")
    [diagnosis] = posts(slack)
    assert "thread_ts" not in diagnosis.params
    assert "<https://runbooks.example/pb/gpu-oom.md|runbook gpu-oom>" in texts(diagnosis.params)
    assert not any(call.method.startswith("files.") for call in slack.calls)  # no metrics, no steps: no chart

    shelve_and_post(settings, poster, EXAMPLES / "io-bound-dcgm-only", thread=None)
    _, io_bound, runbook = posts(slack)
    chart, page = slack.wait_for("files.completeUploadExternal", 2)
    assert runbook.params["thread_ts"] == chart.params["thread_ts"] == page.params["thread_ts"] == io_bound.answer["ts"]


def click_show_evidence(bot: str, slack: SlackStandIn, posted: Call, key: str) -> None:
    answer = post_signed(bot, SECRET, button_click_body(slack, "diagnosis_evidence", key, ALICE, posted))
    assert (answer.status_code, answer.text) == (200, "")


def test_show_evidence_posts_every_quote_in_the_diagnosis_thread(settings, poster, slack, bot):
    alert = poster.post(CHANNEL, notice("straggler-job is slow"))
    key, kept = shelve_and_post(settings, poster, EXAMPLES / "straggler-throttled-gpu", thread=alert)
    diagnosis = posts(slack)[1]
    click_show_evidence(bot, slack, diagnosis, key)
    evidence = slack.wait_for("chat.postMessage", len(posts(slack)) + 1)[-1]
    assert evidence.params["thread_ts"] == alert.ts
    shown = texts(evidence.params)
    assert shown.startswith("*Evidence* behind comm-bound")
    for quote in (quote for found in diagnose_path(kept).findings for quote in found.evidence):
        assert f"`{quote.source}:{quote.line}` `{quote.text}`" in shown


def test_evidence_too_long_for_a_message_comes_as_a_text_file_in_the_thread(settings, poster, slack, bot, tmp_path):
    key, kept = shelve_and_post(settings, poster, hostile_bundle(tmp_path / "hostile"), thread=None)
    diagnosis = posts(slack)[0]
    runbook_pages = len(slack.wait_for("files.completeUploadExternal"))
    click_show_evidence(bot, slack, diagnosis, key)
    completed = slack.wait_for("files.completeUploadExternal", runbook_pages + 1)[-1]
    uploaded = slack.wait_for("upload_url", runbook_pages + 1)[-1]
    assert completed.params["thread_ts"] == diagnosis.answer["ts"]
    assert completed.answer["files"][0]["name"] == f"{key}-evidence.txt"
    text = uploaded.params["content"].decode()
    assert text.startswith("verdict: failed")
    for quote in diagnose_path(kept).findings[0].evidence:
        assert f"> {quote.source}:{quote.line}: {quote.text}" in text  # whole, not cut as in the message


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("straggler-job-0000aaaa", GONE),
        ("../../etc", "'../../etc' is not a bundle key: keys are up to 100 of a-z, 0-9 and '-'"),
    ],
    ids=["gone", "not-a-key"],
)
def test_a_key_with_no_bundle_kept_is_told_to_the_clicker_alone(settings, poster, slack, bot, key, said):
    shelve_and_post(settings, poster, EXAMPLES / "failed-gpu-oom", thread=None)
    diagnosis = posts(slack)[0]
    before = posts(slack)
    click_show_evidence(bot, slack, diagnosis, key)
    [told] = slack.wait_for("chat.postEphemeral")
    assert (told.params["user"], told.params["channel"], told.params["text"]) == (ALICE, CHANNEL, said)
    assert posts(slack) == before
