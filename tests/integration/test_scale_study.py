"""`trainbot scale` on the local head: a 1,2-worker study of tiny-transformer, each point measured, and its chart."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from bot.render.charts import DPI, PANEL_HEIGHT_IN, WIDTH_IN
from tests.integration.cli import trainbot

pytestmark = pytest.mark.integration


def test_a_one_and_two_worker_study_measures_both_points(ray_env, tmp_path):
    chart = tmp_path / "scale.png"
    study = trainbot(
        ray_env, "scale", "tiny-transformer", "batch_size=16", "--workers", "1,2", "--steps", "9",
        "--chart", str(chart), "-o", "json",
    )  # fmt: skip
    result = json.loads(study.stdout)
    assert result["study"]["status"] == "succeeded", result["study"]["reason"]
    assert len(result["study"]["jobs"]) == 2
    one, two = result["table"]["rows"]
    assert (one["workers"], two["workers"]) == (1, 2)
    for row in (one, two):
        assert row["samples_per_s"] > 0 and row["mean_step_s"] > 0
        assert row["data_share"] + row["compute_share"] + row["comm_share"] == pytest.approx(1)
        assert row["per_worker_batch"] == 16
    assert one["speedup"] == pytest.approx(1) and two["efficiency"] == pytest.approx(two["speedup"] / 2)
    assert two["comm_share"] > 0  # two ranks all-reduce their gradients; one does not
    for job in result["study"]["jobs"]:  # each point ran its 10 steps (one of warm-up) in one epoch
        status = json.loads(trainbot(ray_env, "status", job, "-o", "json").stdout)
        assert status["state"] == "SUCCEEDED"
    assert Image.open(io.BytesIO(chart.read_bytes())).size == (WIDTH_IN * DPI, PANEL_HEIGHT_IN * 2 * DPI)
    # Two points of a study compare as any two runs do, measured alike, each with its live verdict.
    drawn = tmp_path / "compare.png"
    jobs = result["study"]["jobs"]
    compared = json.loads(trainbot(ray_env, "compare", *jobs, "-o", "json", "--chart", str(drawn)).stdout)
    a, b = compared["a"], compared["b"]
    assert (a["workers"], b["workers"]) == (1, 2)
    assert (sorted(a["pace"]["rank_step_s"]), sorted(b["pace"]["rank_step_s"])) == (["0"], ["0", "1"])
    assert compared["speedup"] == pytest.approx(two["speedup"])
    assert b["pace"]["comm_share"] == pytest.approx(two["comm_share"])
    # The head still knows both jobs: each verdict comes from its live bundle, as `trainbot diagnose` makes it.
    assert (a["verdict_from"], b["verdict_from"]) == ("live evidence", "live evidence")
    assert a["verdict"] == json.loads(trainbot(ray_env, "diagnose", jobs[0], "--json").stdout)["verdict"]
    assert drawn.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_planted_strong_scaling_case_falls_under_the_threshold_and_its_point_is_diagnosed(ray_env):
    # One sample a worker at 2 workers: the all-reduce costs as much as the step computes.
    study = trainbot(
        ray_env, "scale", "tiny-transformer", "batch_size=2", "--batch", "global", "--workers", "1,2",
        "--steps", "18", "-o", "json",
    )  # fmt: skip
    result = json.loads(study.stdout)
    assert result["table"]["first_below"] == 2
    explained = result["diagnosis"]
    assert explained["job"] == result["study"]["jobs"][1] and explained["workers"] == 2
    assert explained["verdict_from"] == "live evidence"
    assert explained["sources"]["steps"] == "ok"
    # The sizes together name the cause: one sample a worker, the all-reduce grown from nothing at one worker.
    first = explained["findings"][0]
    assert first["id"] == "small-batch", [finding["id"] for finding in explained["findings"]]
    assert explained["across"][0] == "small-batch"
    assert "1 sample a step (2 samples at 1 worker)" in first["detail"]
    assert "0% of the step at 1 worker and " in first["detail"]
    one, two = result["study"]["jobs"]
    assert [quote["source"] for quote in first["evidence"]] == [
        f"{one}/steps/rank-0.jsonl",
        f"{two}/steps/rank-0.jsonl",
    ]


def test_a_one_and_two_worker_study_in_parallel_runs_both_points_at_once_and_measures_both(ray_env):
    study = trainbot(
        ray_env, "scale", "tiny-transformer", "batch_size=16", "--workers", "1,2", "--steps", "9", "--parallel",
        "-o", "json",
    )  # fmt: skip
    result = json.loads(study.stdout)
    assert result["study"]["status"] == "succeeded", result["study"]["reason"]
    assert result["study"]["parallel"] is True
    assert [row["workers"] for row in result["table"]["rows"]] == [1, 2]
    assert all(row["samples_per_s"] > 0 and row["mean_step_s"] > 0 for row in result["table"]["rows"])
    one, two = (json.loads(trainbot(ray_env, "status", job, "-o", "json").stdout) for job in result["study"]["jobs"])
    assert one["state"] == two["state"] == "SUCCEEDED"
    # At once: each started before the other ended (in turn, the second starts after the first ends).
    assert one["start_time"] < two["end_time"] and two["start_time"] < one["end_time"]


def test_a_parallel_study_the_head_cannot_hold_is_refused_in_one_line_before_anything_runs(ray_env):
    before = trainbot(ray_env, "jobs", "-o", "json").stdout
    refused = trainbot(
        ray_env, "scale", "tiny-transformer", "batch_size=16", "--workers", "1,2,4", "--parallel", check=False
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        "trainbot: --parallel: the 3 points need 7 CPUs and 0 GPUs at once, and local has 4 CPUs and 0 GPUs; "
        "drop --parallel or give fewer sizes"
    )
    assert trainbot(ray_env, "jobs", "-o", "json").stdout == before
