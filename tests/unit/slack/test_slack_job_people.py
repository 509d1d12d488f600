"""One person, one name, for jobs: a job launched in Slack (by a user id) or in the CLI (`--as NAME`) records the
name `people:` gives, the CLI shows that name, Slack mentions the person, and a template's `allowed` and a listing's
`--requester` take either spelling. The real Bolt app over HTTP, the Slack stand-in, the KubeRay stand-in; the CLI
is the real `trainbot` on the same state store and stand-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from actions.settings import Settings
from tests.integration.cli import trainbot
from tests.standins.slack_bot import command, serving_bot, slack_settings, texts
from tests.standins.slack_standin import SlackStandIn

PEOPLE = {"alice": "U01ALICE", "bob": "U02BOB"}
# Allowed to alice by her Slack id and to bob by his name.
GUARDED = {"entrypoint": ["python", "train.py"], "allowed": ["U01ALICE", "bob"]}


@pytest.fixture
def settings(tmp_path: Path, slack: SlackStandIn, kubeconfig: Path) -> Settings:
    return slack_settings(
        tmp_path / "data", slack, backend="kuberay", namespace="default", people=PEOPLE,
        templates={"guarded": GUARDED}, slack_commands={"launch": {"channels": ["C0ML"]}},
    )  # fmt: skip


@pytest.fixture
def bot(settings: Settings) -> Iterator[str]:
    yield from serving_bot(settings)


@pytest.fixture
def cli_env(settings: Settings, kubeconfig: Path, tmp_path: Path) -> dict[str, str]:
    """The environment of a `trainbot` with the bot's people, templates, state store and cluster."""
    config = tmp_path / "trainbot.yaml"
    config.write_text(yaml.safe_dump({"people": PEOPLE, "templates": {"guarded": GUARDED}}))
    return {
        "TRAINBOT_CONFIG": str(config),
        "TRAINBOT_DATA_DIR": str(settings.data_dir),
        "TRAINBOT_BACKEND": "kuberay",
        "TRAINBOT_NAMESPACE": "default",
        "KUBECONFIG": str(kubeconfig),
    }


def slack_jobs(bot: str, slack: SlackStandIn, words: str = "") -> str:
    return texts(command(bot, slack, "/train", f"jobs {words}".strip()))


def launched_in_slack(bot: str, slack: SlackStandIn, template: str, user: str) -> str:
    said = texts(command(bot, slack, "/train", f"launch {template}", user=user))
    assert said.startswith("Launched "), said
    return said.removeprefix("Launched ").split(";")[0]


def test_a_job_launched_in_slack_is_its_launcher_s_by_name_in_the_cli_and_a_mention_in_slack(bot, slack, cli_env):
    job = launched_in_slack(bot, slack, "tiny-transformer", "U01ALICE")

    listed = trainbot(cli_env, "jobs").stdout
    [row] = [line for line in listed.splitlines() if line.startswith(job)]
    assert row.split()[4] == "alice" and "U01ALICE" not in listed, listed
    assert [record["requester"] for record in json.loads(trainbot(cli_env, "jobs", "-o", "json").stdout)] == ["alice"]

    assert f"`{job}`  *PENDING*  tiny-transformer on kuberay, by <@U01ALICE>, " in slack_jobs(bot, slack)
    [thread_parent] = [call for call in slack.calls if call.method == "chat.postMessage"]
    assert "tiny-transformer on kuberay, launched by <@U01ALICE> · " in texts(thread_parent.params)


def test_a_job_launched_in_the_cli_as_a_name_is_a_mention_in_slack_and_listed_by_either_spelling(bot, slack, cli_env):
    job = json.loads(trainbot(cli_env, "launch", "tiny-transformer", "--as", "alice", "-o", "json").stdout)["name"]

    shown = slack_jobs(bot, slack)
    assert f"`{job}`  *PENDING*  tiny-transformer on kuberay, by <@U01ALICE>, " in shown
    for spelling in ("alice", "U01ALICE"):
        assert job in slack_jobs(bot, slack, f"--requester {spelling}")
        assert trainbot(cli_env, "jobs", "--requester", spelling, "-o", "name").stdout == f"{job}\n"
    assert job not in slack_jobs(bot, slack, "--requester U02BOB")
    assert not trainbot(cli_env, "jobs", "--requester", "bob", "-o", "name").stdout.strip()


def test_a_template_s_allowed_people_launch_by_name_or_slack_id_in_the_cli_and_in_slack(bot, slack, cli_env):
    by_alice = trainbot(cli_env, "launch", "guarded", "--as", "alice", "-o", "name")  # allowed as U01ALICE
    by_bob = launched_in_slack(bot, slack, "guarded", "U02BOB")  # allowed as bob
    assert trainbot(cli_env, "jobs", "--requester", "bob", "-o", "name").stdout == f"{by_bob}\n"
    assert trainbot(cli_env, "jobs", "--requester", "alice", "-o", "name").stdout == by_alice.stdout

    refused = trainbot(cli_env, "launch", "guarded", "--as", "carol", check=False)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "trainbot: carol may not run template guarded; ask one of: alice, bob\n"
    said = texts(command(bot, slack, "/train", "launch guarded", user="U03CAROL"))
    assert said == ":warning: U03CAROL may not run template guarded; ask one of: alice, bob"
