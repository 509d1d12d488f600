"""One real local Ray head for the whole test session, started the way the local backend starts it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from actions.jobs.backends.local_head import ensure_head, stop_head
from actions.settings import Settings


@pytest.fixture(scope="session")
def ray_settings() -> Iterator[Settings]:
    """Settings of a session-wide local Ray head; its data directory is short enough for Ray's sockets."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # The memory-kill test needs Ray's monitor to act at 40% of RAM; it reads this only at head start.
    os.environ.setdefault("RAY_memory_usage_threshold", "0.4")
    with tempfile.TemporaryDirectory(prefix="tb-", dir="/tmp") as data_dir:
        # The data directory's own head, on the free ports it records there, as a launch starts it.
        settings = Settings(data_dir=Path(data_dir), local_num_cpus=4)
        try:
            ensure_head(settings)
            yield settings
        finally:
            stop_head(settings)


@pytest.fixture(scope="session")
def ray_env(ray_settings: Settings) -> dict[str, str]:
    """TRAINBOT_* variables that point a `trainbot` subprocess at the session's head."""
    return {
        "TRAINBOT_DATA_DIR": str(ray_settings.data_dir),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
