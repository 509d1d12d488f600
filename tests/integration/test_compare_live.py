"""`trainbot compare` of two real jobs on the local head: their step timings and their live diagnoses."""

from __future__ import annotations

import json

import pytest

from tests.integration.cli import launch, trainbot

pytestmark = pytest.mark.integration


def test_a_one_and_a_two_worker_run_compared_with_live_verdicts(ray_env, tmp_path):
    jobs = [
        launch(ray_env, "launch", "tiny-transformer", "epochs=1", "steps_per_epoch=8", "--workers", workers)
        for workers in ("1", "2")
    ]
    for job in jobs:
        assert json.loads(trainbot(ray_env, "status", job, "--wait", "-o", "json").stdout)["state"] == "SUCCEEDED"
    chart = tmp_path / "compare.png"
    compared = json.loads(trainbot(ray_env, "compare", *jobs, "-o", "json", "--chart", str(chart)).stdout)
    a, b = compared["a"], compared["b"]
    assert (a["workers"], b["workers"]) == (1, 2)
    assert (sorted(a["pace"]["rank_step_s"]), sorted(b["pace"]["rank_step_s"])) == (["0"], ["0", "1"])
    assert a["pace"]["samples_per_s"] > 0 and b["pace"]["samples_per_s"] > 0
    assert compared["speedup"] == pytest.approx(b["pace"]["samples_per_s"] / a["pace"]["samples_per_s"])
    # The head still knows both jobs: each verdict comes from its live bundle, as `trainbot diagnose` makes it.
    assert (a["verdict_from"], b["verdict_from"]) == ("live evidence", "live evidence")
    assert a["verdict"] == json.loads(trainbot(ray_env, "diagnose", jobs[0], "--json").stdout)["verdict"]
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
