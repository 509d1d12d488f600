"""One real local Ray head for the whole test session, started the way the local backend starts it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from actions.jobs.backends.local_head import ensure_head, stop_head
from actions.settings import Settings
from tests.servers.processes import free_port


@pytest.fixture(scope="session")
def ray_settings() -> Iterator[Settings]:
    """Settings of a session-wide local Ray head; its data directory is short enough for Ray's sockets."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # The memory-kill test needs Ray's monitor to act at 40% of RAM; it reads this only at head start.
    os.environ.setdefault("RAY_memory_usage_threshold", "0.4")
    with tempfile.TemporaryDirectory(prefix="tb-", dir="/tmp") as data_dir:
        settings = Settings(
            data_dir=Path(data_dir),
            # Free ports, not Ray's defaults: other checkouts on this machine may run a head of their own.
            local_dashboard_port=free_port(),
            local_gcs_port=free_port(),
            local_num_cpus=4,
        )
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
        "TRAINBOT_LOCAL_DASHBOARD_PORT": str(ray_settings.local_dashboard_port),
        "TRAINBOT_LOCAL_GCS_PORT": str(ray_settings.local_gcs_port),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
