"""Fixtures every test folder shares."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.local_slack import LocalSlack, local_slack


@pytest.fixture
def slack() -> Iterator[LocalSlack]:
    """The local Slack, recording what the bot calls; a test module may override it (user groups, Socket Mode)."""
    with local_slack() as served:
        yield served
