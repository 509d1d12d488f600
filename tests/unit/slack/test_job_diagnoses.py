"""Which job an alert thread's diagnosis is about."""

from __future__ import annotations

import pytest

from actions.settings import Settings
from bot.slack.listeners.diagnose_job import alerted_job


@pytest.mark.parametrize(
    ("backend", "namespace", "diagnosed"),
    [
        ("kuberay", "team-b", "team-b/llm-ft"),  # not the bot's namesake RayJob in ml
        ("kuberay", "ml", "llm-ft"),
        ("kuberay", "", "llm-ft"),
        ("local", "team-b", "llm-ft"),
    ],
)
def test_an_alert_about_another_namespace_diagnoses_the_rayjob_there(tmp_path, backend, namespace, diagnosed):
    settings = Settings(data_dir=tmp_path, backend=backend, namespace="ml")
    assert alerted_job(settings, "llm-ft", namespace) == diagnosed
