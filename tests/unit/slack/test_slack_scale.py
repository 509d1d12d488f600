"""`/train scale` through the real slack-bolt App over HTTP, on the KubeRay stand-in: the study's thread (its parent
edited point after point, each point's launch and end as replies), its table and chart at the end, and the
mistakes answered before anything launches. The test plays the operator, writing each RayJob's status, and the
workload, writing its ranks' step timings (the real local head runs a study in tests/integration/test_console.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import kmock
import pytest

from actions.jobs.studies import StudyStatus, StudyStore
from actions.settings import Settings
from bot.console.local_slack import Call
from tests.builders.step_files import write_steps
from tests.standins.kube_standin import RAYJOBS, ServedStandin
from tests.standins.slack_bot import command, edits_of, serving_bot, slack_settings, texts
from tests.standins.slack_standin import SlackStandIn

CHANNEL = "C0ML"
STUDY = "scale tiny-transformer batch_size=16 --workers 1,2 --steps 9"
ENDED = {
    "SUCCEEDED": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete", "jobId": "raysubmit_1"},
    "FAILED": {
        "jobStatus": "FAILED",
        "jobDeploymentStatus": "Failed",
        "jobId": "raysubmit_1",
        # Ray's message carries the log's end: the study's reason holds it whole, too long for one message.
        "message": "Job entrypoint command failed with exit code 1, last available logs:\n"
        + "".join(f"  File train.py, line {line}, in step\n" for line in range(120)),
    },
}
WAIT_S = 30.0


@pytest.fixture
def settings(tmp_path: Path, slack: SlackStandIn, kuberay: ServedStandin) -> Settings:
    # A point that fails is diagnosed live first: the stand-in's RayJob has no cluster to collect from.
    return slack_settings(
        tmp_path / "data", slack, backend="kuberay", namespace="default", collect_deadline_s=5,
        slack_commands={"launch": {"channels": [CHANNEL]}},
    )  # fmt: skip


@pytest.fixture
def bot(settings: Settings) -> Iterator[str]:
    yield from serving_bot(settings)


def started(bot: str, slack: SlackStandIn, text: str = STUDY) -> tuple[str, Call]:
    """Ask for a study; its id and the message that heads its thread."""
    said = texts(command(bot, slack, "/train", text, channel=CHANNEL))
    found = re.fullmatch(
        r"Studying tiny-transformer at 1, 2 workers as (\S+); its thread in this channel follows it\.", said
    )
    assert found, said
    parent = next(call for call in slack.wait_for("chat.postMessage") if call.params["text"].startswith(found[1]))
    return found[1], parent


def reply(slack: SlackStandIn, parent: Call, pattern: str) -> re.Match[str]:
    """The first match of `pattern` in a message in `parent`'s thread, waiting for it."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for text in thread_of(slack, parent):
            if found := re.search(pattern, text, re.DOTALL):
                return found
        time.sleep(0.1)
    raise AssertionError(f"no reply matching {pattern!r} within {WAIT_S} s; the thread: {thread_of(slack, parent)}")


def thread_of(slack: SlackStandIn, parent: Call) -> list[str]:
    """What the messages in `parent`'s thread say, in order."""
    return [
        texts(call.params)
        for call in list(slack.calls)
        if call.method == "chat.postMessage" and call.params.get("thread_ts") == parent.answer["ts"]
    ]


def run_point(slack: SlackStandIn, kuberay: ServedStandin, settings: Settings, parent: Call, point: int,
              ended: str = "SUCCEEDED") -> str:  # fmt: skip
    """Point `point` (1 or 2 workers) launched, its ranks' step timings written and its RayJob ended as `ended`."""
    job = reply(slack, parent, rf"Launched (\S+), point {point} of 2: {point} workers?, batch 16 a worker")[1]
    assert kuberay.rayjob(job) is not None
    write_steps(settings.runs_dir() / job, ranks=point, step_s=0.1, comm_s=0.01 * (point - 1), samples=16)
    kuberay.set_status(job, ENDED[ended])
    reply(slack, parent, rf"{re.escape(job)} is {ended}")
    return job


def test_a_study_has_a_thread_that_follows_its_points_and_ends_with_the_table_and_the_chart(
    bot, slack, kuberay, settings
):
    study, parent = started(bot, slack)
    assert parent.params["channel"] == CHANNEL
    assert parent.params["text"] == f"{study}: starting"
    shown = texts(parent.params)
    what = "Scaling study of tiny-transformer at 1, 2 workers on kuberay, per-worker batch, 9 measured steps a point"
    assert f"{what}, asked by <@U01ALICE> · `lr=0.003` `batch_size=16` " in shown
    assert "steps_per_epoch" not in shown  # the study sets it (from --steps): the template's default would mislead

    one = run_point(slack, kuberay, settings, parent, 1)
    two = run_point(slack, kuberay, settings, parent, 2)

    table = reply(slack, parent, rf"\*Scaling study {study}: succeeded\*\n```(.*)```")[1]
    assert re.search(rf"\n +1 +0 +16 +160\.0 +1\.00x +1\.00 +0%/100%/0% +{one}\n", table), table
    assert re.search(rf"\n +2 +0 +16 +\d+\.\d +\d\.\d\dx +\d\.\d\d +0%/\d+%/\d+% +{two}\n", table), table
    uploading = ("files.getUploadURLExternal", "upload_url", "files.completeUploadExternal")
    [asked], [uploaded], [completed] = (slack.wait_for(method) for method in uploading)
    assert asked.params["filename"] == f"{study}.png"
    assert uploaded.params["content"].startswith(b"\x89PNG\r\n\x1a\n")
    assert (completed.params["channel_id"], completed.params["thread_ts"]) == (CHANNEL, parent.answer["ts"])

    progress = edits_of(slack, parent)
    assert f"{study}: point 1 of 2, {one} (1 worker) SUCCEEDED" in progress
    assert f"{study}: point 2 of 2, {two} (2 workers) SUCCEEDED" in progress
    assert re.fullmatch(
        rf"{study}: succeeded, efficiency 1\.00 at 1, \d\.\d\d at 2, at or above 0\.8 at every measured size",
        progress[-1],
    )
    # The points' jobs told their launch and end in the study's thread: none opened a thread of its own.
    assert [call for call in slack.calls if call.method == "chat.postMessage" and not call.params.get("thread_ts")] == [
        parent
    ]


def test_a_point_that_fails_ends_the_study_with_what_was_measured_and_its_diagnosis(bot, slack, kuberay, settings):
    study, parent = started(bot, slack)
    one = run_point(slack, kuberay, settings, parent, 1)
    two = run_point(slack, kuberay, settings, parent, 2, ended="FAILED")

    table = reply(slack, parent, rf"\*Scaling study {study}: failed\*\n```(.*)```")[1]
    assert re.search(rf"\n +1 +0 +16 +160\.0 +1\.00x +1\.00 +0%/100%/0% +{one}\n", table), table
    assert f"ended early: the 2-worker point ({two}) ended FAILED: Job entrypoint command failed" in table
    # The table is clipped to a message; the whole text, the point's diagnosis to its end, is the file beside it.
    assert table.endswith("…") and len(table) <= 2900, table
    [whole] = [
        call for call in slack.wait_for("files.getUploadURLExternal", 2) if call.params["filename"].endswith(".txt")
    ]
    assert whole.params["filename"] == f"{study}.txt"
    text = next(call for call in slack.calls if call.method == "upload_url").params["content"].decode()
    assert text.startswith(table.removesuffix("…")) and len(text) > 4000
    assert f"the 2-worker point ({two}), because it ended the study" in text
    assert re.search(r"\nsources: logs \S+, k8s \S+, .*\Z", text), text[-300:]
    # The failed point wrote step timings before it failed: they are measured, and shown.
    assert re.search(rf"\n +2 +0 +16 +\d+\.\d +\d\.\d\dx +\d\.\d\d +0%/\d+%/\d+% +{two}\n", table), table
    assert re.fullmatch(
        rf"{study}: failed, efficiency 1\.00 at 1, \d\.\d\d at 2, at or above 0\.8 at every measured size; "
        rf"the 2-worker point \({two}\) ended FAILED: Job entrypoint command failed with exit code 1, last available "
        "logs; "
        "the 2-worker point is diagnosed in the thread",
        edits_of(slack, parent)[-1],
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{STUDY} --chart c.png", ":warning: /train: in Slack the chart is posted with the result; drop --chart"),
        (f"{STUDY} -o json", ":warning: /train: in Slack the answer is a message; drop -o"),
        (f"{STUDY} -ojson", ":warning: /train: in Slack the answer is a message; drop -o"),
        (f"{STUDY} --backend local", ":warning: /train: Slack launches on the bot's backend (TRAINBOT_BACKEND)"),
        (f"{STUDY} --as bob", ":warning: /train: in Slack you act as yourself; drop --as"),
        ("scale tiny-transformer batch_size=16 --workers 2", ":warning: --workers 2: give 2 to 8 sizes"),
        (
            "scale tiny-transformer batch_size=15 --batch global --workers 1,2",
            ":warning: --batch global: batch_size=15 does not divide over 2 workers",
        ),
        (
            f"{STUDY} steps_per_epoch=5",
            ":warning: steps_per_epoch is set by --steps in a study; drop steps_per_epoch=5",
        ),
        (
            "scale tiny-transformer batch_size=16",
            ":warning: /train scale: the following arguments are required: --workers",
        ),
    ],
)
def test_a_scale_mistake_is_one_ephemeral_line_and_launches_nothing(bot, slack, kuberay, text, message):
    reply = command(bot, slack, "/train", text, channel=CHANNEL)
    assert reply["response_type"] == "ephemeral"
    assert texts(reply).startswith(message), texts(reply)
    assert not [call for call in slack.calls if call.method == "chat.postMessage"]
    assert not list(kuberay.api[kmock.action.CREATE])


def test_a_study_launches_only_where_launching_is_allowed(bot, slack, kuberay):
    said = texts(command(bot, slack, "/train", STUDY, channel="C0OTHER"))
    assert said == ":warning: scale is allowed only in C0ML"
    assert not [call for call in slack.calls if call.method == "chat.postMessage"]


def test_a_point_the_cluster_refuses_ends_the_study_saying_why_with_nothing_measured(bot, slack, kuberay):
    kuberay.call(kuberay.api.forbid, "create", RAYJOBS)
    study, parent = started(bot, slack)

    table = reply(slack, parent, rf"\*Scaling study {study}: failed\*\n```(.*)```")[1]
    assert "ended early: the 1-worker point could not run: " in table
    assert edits_of(slack, parent)[-1].startswith(
        f"{study}: failed, nothing measured; the 1-worker point could not run: "
    )
    time.sleep(2)  # a chart would follow the table at once
    assert not thread_of(slack, parent)[:-1]  # no point was launched: the table is all the thread holds
    assert not [call for call in slack.calls if call.method.startswith("files.")]  # nor a chart of empty axes


def test_studies_run_one_at_a_time_so_their_points_never_compete(bot, slack, kuberay, settings):
    first, first_parent = started(bot, slack)
    second, second_parent = started(bot, slack)
    assert second_parent.params["text"] == f"{second}: waiting, another study runs first; studies run one at a time"

    run_point(slack, kuberay, settings, first_parent, 1)
    run_point(slack, kuberay, settings, first_parent, 2)
    submitted = [request for request in kuberay.api[kmock.action.CREATE] if "dryRun" not in str(request.url)]
    assert len(submitted) == 2  # the second study has launched nothing yet
    assert not thread_of(slack, second_parent)
    reply(slack, first_parent, rf"\*Scaling study {first}: succeeded\*")

    run_point(slack, kuberay, settings, second_parent, 1)
    run_point(slack, kuberay, settings, second_parent, 2)
    reply(slack, second_parent, rf"\*Scaling study {second}: succeeded\*")


def test_a_study_that_fails_unexpectedly_says_so_in_its_thread_with_an_incident_id(
    bot, slack, kuberay, settings, caplog
):
    slack.refusing["chat.update"] = "message_not_found"  # someone deleted the study's message
    study, parent = started(bot, slack)

    said = reply(slack, parent, rf"{study} stopped: trainbot failed on this; incident (\w+) is in its log")
    assert f"incident {said[1]} on scale study" in caplog.text
    stored = StudyStore(settings.state_url()).get(study)  # ended in the state store, not left running
    assert (stored.status, stored.reason) == (StudyStatus.FAILED, f"stopped: {said[0].split(': ', 1)[1]}")
    # The parent could not be edited to say so either: the log says that much.
    deadline = time.monotonic() + WAIT_S
    while f"scaling study {study} stopped and its thread could not be told" not in caplog.text:
        assert time.monotonic() < deadline, caplog.text
        time.sleep(0.1)


def test_a_parallel_studys_points_each_reply_once_at_launch_and_once_at_their_end(bot, slack, kuberay, settings):
    study, parent = started(bot, slack, f"{STUDY} --parallel")
    jobs = [reply(slack, parent, rf"Launched (\S+), point {point} of 2: {point} workers?")[1] for point in (1, 2)]
    for point, job in enumerate(jobs, start=1):
        write_steps(settings.runs_dir() / job, ranks=point, step_s=0.1, comm_s=0.01 * (point - 1), samples=16)
    time.sleep(5)  # both points polled in turn, more than once, while they run
    for job in jobs:
        kuberay.set_status(job, ENDED["SUCCEEDED"])
    reply(slack, parent, rf"\*Scaling study {study}: succeeded\*")
    said = thread_of(slack, parent)
    assert [text for text in said if text.startswith("Launched")] == [
        f"Launched {jobs[0]}, point 1 of 2: 1 worker, batch 16 a worker",
        f"Launched {jobs[1]}, point 2 of 2: 2 workers, batch 16 a worker",
    ]
    assert sum(f"{job} is SUCCEEDED" in text for text in said for job in jobs) == 2
