"""The `promotion:` config: targets, approvers, durations and checks, and the messages for mistakes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actions.errors import BadRequest, Forbidden
from actions.promotions.policy import (
    Actor,
    BeatsCurrent,
    MetricCheck,
    parse_check,
    parse_duration,
    promotion_targets,
    target_policy,
)
from actions.settings import SettingsError

ISSUE_EXAMPLE = {
    "targets": {
        "staging": {"requesters": [], "approvers": ["U02B"], "approvals": 1, "expires": "24h"},
        "production": {
            "approvers": ["U02B", "U03C"],
            "approver_groups": ["S0MLLEADS"],
            "approvals": 2,
            "checks": ["val_loss < 2.0"],
        },
    }
}


def test_the_issue_example_reads_as_written() -> None:
    targets = promotion_targets(ISSUE_EXAMPLE)
    assert set(targets) == {"staging", "production"}
    staging, production = targets["staging"], targets["production"]
    assert (staging.approvers, staging.approvals, staging.expires) == ({"U02B"}, 1, timedelta(hours=24))
    assert staging.requesters == frozenset()
    assert production.approver_groups == {"S0MLLEADS"}
    assert production.checks == (MetricCheck("val_loss", "<", 2.0),)


def test_without_config_staging_and_production_exist_and_production_wants_two() -> None:
    targets = promotion_targets({})
    assert (targets["staging"].approvals, targets["production"].approvals) == (1, 2)
    assert targets["production"].expires == timedelta(hours=24)
    production = promotion_targets({"targets": {"production": {"approvers": ["U02B"]}}})["production"]
    assert production.approvals == 2


def test_any_alias_in_the_config_is_a_target() -> None:
    targets = promotion_targets({"targets": {"canary-eu": {"approvers": ["U1"], "beats_current": "val_loss"}}})
    assert targets["canary-eu"].beats_current == BeatsCurrent("val_loss", "min")
    with pytest.raises(BadRequest, match="unknown target 'prod'; the targets are canary-eu, production, staging"):
        target_policy(targets, "prod")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"targets": {"latest": {}}}, "cannot be an MLflow alias"),
        ({"targets": {"v3": {}}}, "cannot be an MLflow alias"),
        ({"targets": {"bad alias": {}}}, "cannot be an MLflow alias"),
        ({"targets": {"staging": {"approver": ["U1"]}}}, "unknown key(s) approver"),
        ({"targets": {"staging": {"approvals": 0}}}, "approvals must be 1 or more"),
        ({"targets": {"staging": {"approvers": "U02B"}}}, "expected a list of Slack ids"),
        ({"targets": {"staging": {"expires": "tomorrow"}}}, "not a duration like 24h"),
        ({"targets": {"staging": {"checks": ["val_loss < nan"]}}}, "is not a check like"),
        ({"targets": {"staging": {"checks": ["rm -rf /"]}}}, "is not a check like"),
        ({"targets": {"staging": {"beats_current": {"metric": "x", "mode": "up"}}}}, "beats_current:"),
        ({"targets": ["staging"]}, "must map each target alias"),
        ([], "must be a mapping"),
    ],
)
def test_config_mistakes_name_the_key_to_fix(config: object, message: str) -> None:
    with pytest.raises(SettingsError, match="promotion") as raised:
        promotion_targets(config)  # type: ignore[arg-type]
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", timedelta(hours=24)),
        ("90m", timedelta(minutes=90)),
        ("1d12h", timedelta(hours=36)),
        ("2w", timedelta(days=14)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "0h", "h", "24", "24h and more", "-1h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "value", "holds"),
    [
        ("val_loss < 2.0", 1.9, True),
        ("val_loss < 2.0", 2.0, False),
        ("accuracy >= 0.9", 0.9, True),
        ("f1>0.5", 0.4, False),
    ],
)
def test_checks(text: str, value: float, holds: bool) -> None:
    assert parse_check(text).holds(value) is holds


def test_who_may_request_and_approve() -> None:
    targets = promotion_targets(
        {"targets": {"production": {"requesters": ["U01"], "approvers": ["U02B"], "approver_groups": ["S0LEADS"]}}}
    )
    production = targets["production"]
    production.check_requester(Actor("U01"))
    with pytest.raises(Forbidden, match="U09 may not request promotions to production; ask one of U01"):
        production.check_requester(Actor("U09"))
    production.check_approver(Actor("U02B"), requester="U01")
    production.check_approver(Actor("U07", frozenset({"S0LEADS"})), requester="U01")
    with pytest.raises(Forbidden, match="you are not an approver for production"):
        production.check_approver(Actor("U07"), requester="U01")
    with pytest.raises(Forbidden, match="nobody approves their own request"):
        production.check_approver(Actor("U02B"), requester="U02B")
    with pytest.raises(Forbidden, match=r"set promotion\.targets\.staging\.approvers"):
        targets["staging"].check_approver(Actor("U02B"), requester="U01")


@pytest.mark.parametrize("staging", [{}, {"requesters": []}, {"requesters": None}])
def test_an_empty_or_missing_requesters_list_lets_anyone_request(staging: dict) -> None:
    promotion_targets({"targets": {"staging": staging}})["staging"].check_requester(Actor("U09ANYONE"))
