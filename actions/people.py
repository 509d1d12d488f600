"""One person, one name: who is who across the CLI, the console and Slack.

`people:` in the config maps each person's name (what the CLI's `--as NAME` says) to their Slack user id;
the console adds its own names (bob -> UBOB). Trainbot records a person by name wherever it knows one (who
launched a job, who asked for or approved a promotion), so a job launched in Slack by <@U01ALICE> and one
launched in the CLI as alice are both alice's, and it shows the name (in Slack: the mention, which Slack
renders as the name). An id nobody named stays an id. Jobs and promotions share it: it lives beside them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping


class People:
    def __init__(self, slack_ids: Mapping[str, str] | None = None) -> None:
        self._slack_ids: dict[str, str] = {}  # name -> Slack user id
        self._names: dict[str, str] = {}  # Slack user id -> name
        self._lock = threading.Lock()
        for name, slack_id in (slack_ids or {}).items():
            self.add(name, slack_id)

    def add(self, name: str, slack_id: str) -> None:
        """`name` is the person whose Slack user id is `slack_id`."""
        with self._lock:
            self._slack_ids[name] = slack_id
            self._names[slack_id] = name

    def name(self, who: str) -> str:
        """The name trainbot records and shows for `who`, a name or a Slack user id."""
        return self._names.get(who, who)

    def names(self, spellings: Iterable[str]) -> frozenset[str]:
        """Names and ids (a config's approvers, say) as the names they stand for."""
        return frozenset(self.name(who) for who in spellings)

    def slack_id(self, who: str) -> str:
        """Whom to mention in Slack for `who`: their user id where it is known, else `who` as it is."""
        return self._slack_ids.get(self.name(who), who)
