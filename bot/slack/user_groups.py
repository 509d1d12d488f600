"""Slack user groups' members, as usergroups.users.list says, trusted for a minute before Slack is asked again."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slack_sdk import WebClient

GROUP_TTL_S = 60.0


class UserGroups:
    def __init__(self, client: WebClient, ttl_s: float = GROUP_TTL_S) -> None:
        self._client = client
        self._ttl_s = ttl_s
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def of(self, user: str, groups: Iterable[str]) -> frozenset[str]:
        """Those of `groups` that `user` belongs to."""
        return frozenset(group for group in groups if user in self.members(group))

    def members(self, group: str) -> frozenset[str]:
        with self._lock:
            cached = self._members.get(group)
        if cached and time.monotonic() - cached[0] < self._ttl_s:
            return cached[1]
        users = frozenset(self._client.usergroups_users_list(usergroup=group).get("users") or ())
        with self._lock:
            self._members[group] = (time.monotonic(), users)
        return users
