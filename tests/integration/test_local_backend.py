"""The local backend end to end through the real `trainbot` CLI and a real Ray head on 127.0.0.1."""

from __future__ import annotations

import json

import mlflow
import pytest
from mlflow import MlflowClient

from actions.jobs.backends.local import LocalBackend
from actions.jobs.records import Store
from actions.jobs.watcher import watch
from tests.integration.cli import launch, trainbot, wait_for

pytestmark = pytest.mark.integration


def test_tiny_transformer_on_two_cpu_workers_runs_to_success(ray_env):
    job = launch(ray_env, "launch", "tiny-transformer", "epochs=2", "steps_per_epoch=10", "--workers", "2")
    status = wait_for(ray_env, job, {"SUCCEEDED", "FAILED", "STOPPED"})
    assert status["state"] == "SUCCEEDED", trainbot(ray_env, "logs", job).stdout
    assert [event["state"] for event in status["history"]][-1] == "SUCCEEDED"

    listed = json.loads(trainbot(ray_env, "jobs", "-o", "json").stdout)
    assert job in [record["name"] for record in listed]
    mine = next(record for record in listed if record["name"] == job)
    assert mine["template"] == "tiny-transformer"
    assert mine["workers"] == 2
    assert mine["params"]["epochs"] == 2

    tail = trainbot(ray_env, "logs", job[:-2], "--tail", "5").stdout
    assert 0 < len(tail.splitlines()) <= 5


def test_a_running_job_can_be_cancelled(ray_env):
    job = launch(ray_env, "launch", "tiny-transformer", "epochs=1000", "steps_per_epoch=1000", "--workers", "1")
    wait_for(ray_env, job, {"RUNNING"}, timeout_s=120)
    cancelled = json.loads(trainbot(ray_env, "cancel", job, "-o", "json").stdout)
    assert cancelled["name"] == job
    status = wait_for(ray_env, job, {"STOPPED", "FAILED", "SUCCEEDED"}, timeout_s=120)
    assert status["state"] == "STOPPED"
    again = trainbot(ray_env, "cancel", job)
    assert again.stdout == f"{job}: already STOPPED; nothing to stop\n"


def test_status_of_a_job_the_running_head_does_not_know_names_it_in_one_line(ray_env):
    unknown = trainbot(ray_env, "status", "nosuchjob-x1", check=False)
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == (
        "trainbot: no job 'nosuchjob-x1' on the local Ray head; `trainbot jobs` lists the jobs trainbot launched\n"
    )


def test_a_ten_trial_sweep_is_tracked_in_mlflow_and_the_best_registered(ray_env, ray_settings):
    job = launch(
        ray_env, "sweep", "tiny-transformer", "--trials", "10",
        "lr=loguniform(1e-4,3e-2)", "epochs=2", "steps_per_epoch=5", "batch_size=16", "d_model=32", "layers=1",
    )  # fmt: skip
    status = wait_for(ray_env, job, {"SUCCEEDED", "FAILED", "STOPPED"}, timeout_s=600)
    assert status["state"] == "SUCCEEDED", trainbot(ray_env, "logs", job, "--tail", "60").stdout

    mlflow.set_tracking_uri(ray_settings.tracking_uri())
    client = MlflowClient()
    experiment = client.get_experiment_by_name("trainbot/tiny-transformer")
    runs = client.search_runs([experiment.experiment_id], filter_string=f"tags.`trainbot.sweep` = '{job}'")
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    children = [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1
    assert len(children) == 10
    assert all("lr=" in child.info.run_name for child in children)
    assert all(client.get_metric_history(child.info.run_id, "val_loss") for child in children)

    versions = client.search_model_versions("name = 'tiny-transformer'")
    ours = [version for version in versions if version.tags.get("trainbot.sweep") == job]
    assert len(ours) == 1
    best = min((c for c in children if "val_loss" in c.data.metrics), key=lambda c: c.data.metrics["val_loss"])
    assert ours[0].run_id == best.info.run_id


def test_the_watcher_yields_each_transition_once_and_resumes_after_a_restart(ray_env, ray_settings):
    store = Store(ray_settings.state_url())
    store.create_schema()
    job = launch(ray_env, "launch", "tiny-transformer", "epochs=1", "steps_per_epoch=5", "--workers", "1")
    seen = [(t.previous, t.current) for t in watch(LocalBackend(ray_settings), store, timeout_s=8) if t.job == job]
    wait_for(ray_env, job, {"SUCCEEDED", "FAILED"})
    # `status` recorded the end itself; a watcher started now has nothing new to report for this job.
    again = [t for t in watch(LocalBackend(ray_settings), store, timeout_s=4) if t.job == job]
    assert again == []
    history = [event.state for event in store.history(job)]
    assert history[0] == "PENDING"
    assert history[-1] == "SUCCEEDED"
    assert len(history) == len(set(history)), history
    assert all(current in history for _, current in seen)


def test_unknown_jobs_and_bad_parameters_get_one_line_errors(ray_env):
    unknown = trainbot(ray_env, "status", "no-such-job-123", check=False)
    assert unknown.returncode == 2
    assert "no job 'no-such-job-123'" in unknown.stderr
    hostile = trainbot(ray_env, "launch", "tiny-transformer", "lr=$(reboot)", check=False)
    assert hostile.returncode == 2
    assert hostile.stderr.strip() == "trainbot: parameter lr: '$(reboot)' is not a number"


def test_a_local_dry_run_prints_the_submission_and_submits_nothing(ray_env):
    before = json.loads(trainbot(ray_env, "jobs", "-o", "json").stdout)
    dry = json.loads(trainbot(ray_env, "launch", "tiny-transformer", "lr=0.01", "--dry-run", "-o", "json").stdout)
    assert set(dry) == {"submission_id", "entrypoint", "runtime_env", "metadata"}
    assert "--lr 0.01" in dry["entrypoint"]
    assert json.loads(trainbot(ray_env, "jobs", "-o", "json").stdout) == before
