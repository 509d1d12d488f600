"""Who may run which slash command, and where: the `slack_commands` mapping of the config.

    slack_commands:
      launch: {channels: [C0ML]}                      # launching needs a listed channel
      sweep:  {channels: [C0ML], groups: [S0MLENG]}   # ...and here a member of a user group
      logs:   {users: [U02B, carol]}                   # reading can be narrowed too (ids, or names in people:)
      cancel-any: {users: [U0SRE]}                     # who may cancel a RayJob trainbot did not launch

A rule allows a command when the channel is listed (or the rule lists none) and the user is listed or
in a listed group (or the rule lists neither). With no rule: everyone may read; launch, sweep, scale and
cancel need a listed channel (scale, which launches a job at each size, and cancel follow launch's rule unless
they have their own); cancelling a job trainbot did not launch (any RayJob its service account reaches) is
`cancel-any`, which nobody may until a rule names it; approving needs the promotion target's approver list,
which actions/promotions/service.py checks whatever the rule says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from actions.errors import Forbidden
from actions.people import People
from actions.settings import SettingsError
from bot.commands.grammar import MODEL_VERBS, TRAIN_VERBS

RULE_KEYS = {"channels", "users", "groups"}
# Verbs that start work on the cluster: refused until a channel is listed for them.
LAUNCHING = ("launch", "sweep")
# Verbs that follow launch's rule unless they have their own.
FOLLOW_LAUNCH = ("cancel", "scale")
# Not a verb of its own: `/train cancel` of a job the state store does not know (slack_train.py).
CANCEL_ANY = "cancel-any"


@dataclass(frozen=True)
class Rule:
    """None: any channel. Empty users and groups: anyone."""

    channels: frozenset[str] | None = None
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()


class Authorization:
    def __init__(self, configured: Mapping[str, Any], people: People | None = None) -> None:
        self.rules = _rules(configured)
        # A rule's users may be named (bob) or given by id (U02B): the same person either way.
        self.people = people or People()

    def check(
        self, verb: str, user: str, channel: str, groups_of: Callable[[str, Iterable[str]], frozenset[str]]
    ) -> None:
        """Raise Forbidden, saying what to ask for, unless `user` may run `verb` in `channel`.

        `groups_of(user, groups)` gives those of `groups` the user is in (Slack is asked only when a rule
        names groups).
        """
        rule = self.rules.get(verb)
        if rule is None and verb == CANCEL_ANY:
            raise Forbidden(
                "trainbot did not launch that job, and cancelling such a job is allowed to nobody yet: ask whoever "
                f"runs trainbot to list you in slack_commands.{CANCEL_ANY}.users (or .groups) in the config"
            )
        if rule is None:
            return
        if rule.channels is not None and channel not in rule.channels:
            where = ", ".join(sorted(rule.channels))
            raise Forbidden(
                f"{verb} is allowed only in {where}"
                if where
                else f"{verb} is allowed in no channel yet: ask whoever runs trainbot to add this one ({channel}) "
                f"to slack_commands.{verb}.channels in the config"
            )
        listed = self.people.name(user) in self.people.names(rule.users)
        if (rule.users or rule.groups) and not listed and not groups_of(user, rule.groups):
            raise Forbidden(f"you may not {verb} here: slack_commands.{verb} in the config lists who may")


def _rules(configured: Mapping[str, Any]) -> dict[str, Rule]:
    verbs = set(TRAIN_VERBS) | set(MODEL_VERBS) | {CANCEL_ANY}
    rules = {verb: Rule(channels=frozenset()) for verb in LAUNCHING}
    for verb, body in configured.items():
        if verb not in verbs:
            raise SettingsError(f"slack_commands.{verb}: not a command; use one of {', '.join(sorted(verbs))}")
        if not isinstance(body, Mapping) or not set(body) <= RULE_KEYS:
            raise SettingsError(f"slack_commands.{verb}: give channels, users and groups (lists of Slack ids)")
        lists = {key: _ids(verb, key, body.get(key)) for key in RULE_KEYS}
        channels = lists["channels"] if "channels" in body else (rules[verb].channels if verb in rules else None)
        rules[verb] = Rule(channels, lists["users"], lists["groups"])
    for verb in FOLLOW_LAUNCH:
        rules.setdefault(verb, rules["launch"])
    return rules


def _ids(verb: str, key: str, value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SettingsError(f"slack_commands.{verb}.{key}: give a list of Slack ids, e.g. [C0ML]")
    return frozenset(value)
