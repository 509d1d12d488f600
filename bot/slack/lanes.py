"""Which backend the work behind a Slack request waits on: its lane in bot/slack/acked_work.py's bulkhead."""

from __future__ import annotations

from typing import Any

from bot.commands.grammar import HELP_WORDS
from bot.slack.acked_work import Lane

MLFLOW, JOBS, DIAGNOSIS, ALERTMANAGER = "mlflow", "jobs", "diagnosis", "alertmanager"
# /train verbs by the backend they call; `help` (and a typo, answered with the usage) calls none.
TRAIN_LANES = {
    "launch": JOBS,
    "sweep": JOBS,
    # Plans the study and posts its parent; the study itself runs on a thread of its own (study_threads.py).
    "scale": JOBS,
    "status": JOBS,
    "logs": JOBS,
    "cancel": JOBS,
    "jobs": JOBS,
    "diagnose": DIAGNOSIS,
    # Reads two runs' step timings and diagnoses each (and a sweep trial's metric from MLflow).
    "compare": DIAGNOSIS,
}


def train_lane(command: dict[str, Any]) -> str | None:
    return TRAIN_LANES.get(_verb(command))


def model_lane(command: dict[str, Any]) -> str | None:
    """Every /model verb but help reads or writes the MLflow registry."""
    return None if _verb(command) in HELP_WORDS else MLFLOW


def always(lane: str) -> Lane:
    """The lane of a button or modal, which always calls the same backend."""
    return lambda _body: lane


def _verb(command: dict[str, Any]) -> str:
    words = str(command.get("text") or "").split(maxsplit=1)
    return words[0].lower() if words else ""
