"""`/train` against the Kubernetes API stand-in, its answers posted to the local Slack: a job trainbot launched
is the channel's to cancel, any other RayJob the service account reaches needs the `cancel-any` rule (by
default nobody has it); a status shows whatever Ray says within Slack's limits."""

from __future__ import annotations

from pathlib import Path

import kmock
import pytest
from slack_sdk import WebClient

from actions.errors import Forbidden
from actions.jobs.backends.kuberay import KubeRayBackend
from actions.jobs.service import Jobs
from actions.jobs.templates import TINY_TRANSFORMER
from actions.settings import Settings
from bot.commands.grammar import Slash
from bot.render.blocks import Message
from bot.slack.authorization import Authorization
from bot.slack.listeners.train import TrainDesk, answer_train
from tests.builders.kuberay_launches import RUNNING, launch_of, team_launch
from tests.standins.kube_standin import ServedStandin
from tests.standins.slack_standin import SlackStandIn

MAY_LAUNCH = {"launch": {"channels": ["C0ML"]}}


@pytest.fixture
def standin():
    with ServedStandin() as served:
        yield served


@pytest.fixture
def jobs(standin: ServedStandin, tmp_path: Path) -> Jobs:
    settings = Settings(data_dir=tmp_path, backend="kuberay", namespace="default")
    return Jobs(settings, backends={"kuberay": KubeRayBackend(settings, standin.api_client())})


def train(jobs: Jobs, text: str, user: str = "U01ALICE", rules: dict | None = None) -> Message:
    """What `/train TEXT` answers, with `rules` as slack_commands."""
    authorization = Authorization(MAY_LAUNCH if rules is None else rules)

    def authorize(verb: str, slash: Slash) -> None:
        authorization.check(verb, slash.user, slash.channel, lambda user, groups: frozenset())

    desk = TrainDesk(jobs._settings, lambda: jobs, lambda: None, None, authorize, jobs.people, None)  # type: ignore[arg-type]
    return answer_train(Slash(text, user, "C0ML"), desk)


def cancel(jobs: Jobs, job: str, user: str, rules: dict) -> str:
    return train(jobs, f"cancel {job}", user, rules).text


def test_a_rayjob_trainbot_did_not_launch_is_nobody_s_to_cancel_by_default(standin, jobs):
    theirs = team_launch()
    jobs.backend().submit(theirs)  # another team's RayJob, in no state store of ours
    standin.set_status(theirs.name, RUNNING)
    for job in (theirs.name, f"default/{theirs.name}"):
        with pytest.raises(Forbidden, match=r"^trainbot did not launch that job, .* slack_commands.cancel-any.users"):
            cancel(jobs, job, "U01ALICE", MAY_LAUNCH)
    with pytest.raises(Forbidden, match=r"^you may not cancel-any here"):
        cancel(jobs, theirs.name, "U01ALICE", {**MAY_LAUNCH, "cancel-any": {"users": ["U0SRE"]}})
    assert standin.rayjob(theirs.name) is not None

    assert "STOPPED" in cancel(jobs, theirs.name, "U0SRE", {**MAY_LAUNCH, "cancel-any": {"users": ["U0SRE"]}})
    assert standin.rayjob(theirs.name) is None


def test_a_job_trainbot_launched_is_cancelled_without_cancel_any(standin, jobs):
    ours = jobs.launch(launch_of())
    standin.set_status(ours.name, RUNNING)
    assert ours.template == TINY_TRANSFORMER.name
    assert "STOPPED" in cancel(jobs, ours.name[:-2], "U01ALICE", MAY_LAUNCH)  # a prefix finds it
    assert standin.rayjob(ours.name) is None


@pytest.mark.parametrize("words", ["", " --suspend"])
def test_cancelling_a_job_that_had_already_ended_says_so_and_asks_kubernetes_for_nothing(standin, jobs, words):
    ours = jobs.launch(launch_of())
    standin.set_status(ours.name, {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"})
    action = "suspend" if words else "stop"
    said = train(jobs, f"cancel {ours.name}{words}").text
    assert said == f"{ours.name}: already FAILED; nothing to {action}"
    assert standin.rayjob(ours.name) is not None
    assert not list(standin.api[kmock.action.DELETE]) and not list(standin.api[kmock.action.UPDATE])


def test_status_shows_ray_s_whole_20000_character_message_cut_to_slack_s_limits(standin, jobs, slack: SlackStandIn):
    ours = jobs.launch(launch_of())
    said = "Job entrypoint command failed with exit code 1, last available logs:\n" + "<Traceback> " * 1700
    standin.set_status(ours.name, {**RUNNING, "jobStatus": "FAILED", "message": said, "reason": "AppFailed"})
    answer = train(jobs, f"status {ours.name}")
    posted = WebClient(token="xoxb-test", base_url=slack.api_url, timeout=10).chat_postMessage(
        channel="C0ML", text=answer.text, blocks=answer.blocks
    )
    [message_field] = [
        field["text"] for field in posted["message"]["blocks"][1]["fields"] if "*Message*" in field["text"]
    ]
    assert len(said) > 20_000 and len(message_field) == 2000
    assert message_field.startswith("*Message*\nJob entrypoint command failed") and message_field.endswith("…")
    assert "&lt;Traceback&gt;" in message_field  # escaped, never a link or a mention


def test_logs_in_slack_come_without_ray_s_colour_codes(standin, jobs):
    """Before: ESC[36m(RayTrainWorker pid=8676)ESC[0m, as the console showed it."""
    ours = jobs.launch(team_launch())
    log = "\x1b[36m(RayTrainWorker pid=8676)\x1b[0m epoch 1\n\x1b[36m(RayTrainWorker pid=8676)\x1b[0m epoch 2\n"
    standin.set_status(ours.name, RUNNING | {"dashboardURL": standin.serve_dashboard({"raysubmit_1": log})})

    answer = train(jobs, f"logs {ours.name}")

    code = answer.blocks[1]["text"]["text"]
    assert code == "```(RayTrainWorker pid=8676) epoch 1\n(RayTrainWorker pid=8676) epoch 2```"
