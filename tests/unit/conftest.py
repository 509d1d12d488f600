"""Fixtures the unit tests share."""

from pathlib import Path

import pytest

from actions.settings import Settings
from tests.standins.slack_bot import slack_settings
from tests.standins.slack_standin import SlackStandIn


@pytest.fixture
def settings(tmp_path: Path, slack: SlackStandIn, state_store_url: str) -> Settings:
    """Settings of a bot that talks to the `slack` stand-in, its state in the test's folder, on each dialect."""
    return slack_settings(tmp_path, slack, state_store_url=state_store_url)
