"""The slack_commands rules: defaults, channels, users and groups, and config mistakes named."""

from __future__ import annotations

import pytest

from actions.errors import Forbidden
from actions.people import People
from actions.settings import SettingsError
from bot.slack.authorization import Authorization


def nobody(user: str, groups: object) -> frozenset[str]:
    return frozenset()


def test_by_default_everyone_reads_and_nobody_launches_anywhere():
    rules = Authorization({})
    for verb in ("status", "jobs", "logs", "diagnose", "help", "promote", "approve", "requests", "history"):
        rules.check(verb, "U01ALICE", "C0ML", nobody)
    for verb in ("launch", "sweep", "scale", "cancel"):
        expected = rf"^{verb} is allowed in no channel yet: .* slack_commands.{verb}.channels"
        with pytest.raises(Forbidden, match=expected):
            rules.check(verb, "U01ALICE", "C0ML", nobody)


def test_a_listed_channel_allows_launching_there_only_and_cancel_and_scale_follow_launch():
    rules = Authorization({"launch": {"channels": ["C0ML", "C0GPU"]}})
    rules.check("launch", "U01ALICE", "C0GPU", nobody)
    rules.check("cancel", "U01ALICE", "C0ML", nobody)
    rules.check("scale", "U01ALICE", "C0ML", nobody)
    with pytest.raises(Forbidden, match=r"^scale is allowed only in C0GPU, C0ML$"):
        rules.check("scale", "U01ALICE", "C0RANDOM", nobody)
    with pytest.raises(Forbidden, match=r"^launch is allowed only in C0GPU, C0ML$"):
        rules.check("launch", "U01ALICE", "C0RANDOM", nobody)
    with pytest.raises(Forbidden, match=r"^sweep is allowed in no channel yet"):  # sweep has its own rule
        rules.check("sweep", "U01ALICE", "C0ML", nobody)


def test_users_and_groups_narrow_who_and_groups_are_asked_only_when_needed():
    asked: list[str] = []

    def groups_of(user: str, groups: object) -> frozenset[str]:
        asked.append(user)
        return frozenset({"S0MLENG"}) if user == "U03CAROL" else frozenset()

    rules = Authorization({"launch": {"channels": ["C0ML"], "users": ["U02B"], "groups": ["S0MLENG"]}})
    rules.check("launch", "U02B", "C0ML", groups_of)
    assert asked == []
    rules.check("launch", "U03CAROL", "C0ML", groups_of)
    with pytest.raises(Forbidden, match=r"^you may not launch here"):
        rules.check("launch", "U01ALICE", "C0ML", groups_of)
    # A users-only rule on a launching verb keeps its channel requirement.
    with pytest.raises(Forbidden, match="allowed in no channel yet"):
        Authorization({"sweep": {"users": ["U02B"]}}).check("sweep", "U02B", "C0ML", nobody)


@pytest.mark.parametrize(
    ("configured", "message"),
    [
        ({"reboot": {}}, r"^slack_commands.reboot: not a command; use one of approve, cancel"),
        ({"launch": ["C0ML"]}, r"^slack_commands.launch: give channels, users and groups"),
        ({"launch": {"channel": ["C0ML"]}}, r"^slack_commands.launch: give channels, users and groups"),
        ({"launch": {"channels": "C0ML"}}, r"^slack_commands.launch.channels: give a list of Slack ids"),
    ],
)
def test_config_mistakes_name_the_key(configured, message):
    with pytest.raises(SettingsError, match=message):
        Authorization(configured)


def test_cancelling_a_job_trainbot_did_not_launch_is_nobody_s_until_a_rule_names_who():
    with pytest.raises(Forbidden, match=r"^trainbot did not launch that job, .* slack_commands.cancel-any.users"):
        Authorization({"launch": {"channels": ["C0ML"]}}).check("cancel-any", "U01ALICE", "C0ML", nobody)
    rules = Authorization({"cancel-any": {"users": ["U0SRE"], "channels": ["C0OPS"]}})
    rules.check("cancel-any", "U0SRE", "C0OPS", nobody)
    with pytest.raises(Forbidden, match=r"^you may not cancel-any here"):
        rules.check("cancel-any", "U01ALICE", "C0OPS", nobody)
    with pytest.raises(Forbidden, match=r"^cancel-any is allowed only in C0OPS"):
        rules.check("cancel-any", "U0SRE", "C0ML", nobody)


def test_a_rule_names_a_person_by_name_or_by_slack_id():
    people = People({"bob": "U02B", "carol": "U03C"})
    for listed in (["bob"], ["U02B"]):
        rules = Authorization({"logs": {"users": listed}}, people)
        rules.check("logs", "U02B", "C0ML", nobody)
        with pytest.raises(Forbidden, match="you may not logs here"):
            rules.check("logs", "U03C", "C0ML", nobody)
