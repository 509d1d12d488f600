"""The reference trainer and the sweep driver as Ray jobs on the session's real local Ray head.

Jobs are submitted through Ray's job submission API with the template's own argv, the way the
local backend launches them; MLflow is a sqlite store, as in the embedded default.
"""

import json
import os
import re
import shlex
import sys
import time
from pathlib import Path

import mlflow
import pytest
import torch
from mlflow import MlflowClient
from ray.job_submission import JobStatus, JobSubmissionClient

from actions.jobs.backends.local_head import dashboard_url
from actions.jobs.templates import TINY_TRANSFORMER
from diagnosers.bundle import load_bundle
from workloads.model_checkpoint import read_model
from workloads.tune_space import dirname, trial_name

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 240
# BUNDLE.md's step fields, and the device the step ran on (these run on CPU).
STEP_KEYS = {"rank", "step", "time", "step_s", "data_s", "comm_s", "samples", "device"}


@pytest.fixture(scope="module")
def jobs(ray_settings) -> JobSubmissionClient:
    return JobSubmissionClient(dashboard_url(ray_settings))


def run_job(jobs: JobSubmissionClient, argv: list[str], env_vars: dict[str, str]) -> list[str]:
    """Submit `argv`, wait for it to succeed, and return its log lines."""
    runtime_env = {
        "env_vars": {
            **env_vars,
            # The repo's packages for the driver and for the workers Ray starts for it.
            "PYTHONPATH": str(REPO),
            # `python` in the entrypoint is this virtualenv's, whichever shell started the head.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    }
    job_id = jobs.submit_job(entrypoint=shlex.join(argv), runtime_env=runtime_env)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not (status := jobs.get_job_status(job_id)).is_terminal():
        assert time.monotonic() < deadline, f"job {job_id} still {status} after {JOB_TIMEOUT_S} s"
        time.sleep(1)
    logs = jobs.get_job_logs(job_id)
    assert status == JobStatus.SUCCEEDED, logs[-4000:]
    return logs.splitlines()


def last_json(lines: list[str]) -> dict:
    return json.loads(next(line for line in reversed(lines) if line.startswith("{")))


def train(jobs, storage: Path, name: str, workers: int = 2, **params) -> dict:
    values = {**TINY_TRANSFORMER.parse_params([]), **params}
    argv = TINY_TRANSFORMER.argv(values, workers=workers, gpus_per_worker=0)
    return last_json(run_job(jobs, argv, {"TRAINBOT_JOB": name, "TRAINBOT_STORAGE": str(storage)}))


def step_records(steps_dir: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (steps_dir / f"rank-{rank}.jsonl").read_text().splitlines()]


def test_ddp_run_writes_steps_and_checkpoints_and_resumes_where_it_stopped(jobs, tmp_path):
    first = train(jobs, tmp_path, "ddp-resume", epochs=1, steps_per_epoch=6, checkpoint_every=3)
    assert (first["strategy"], first["workers"], first["global_step"], first["epoch"]) == ("ddp", 2, 6, 1)
    steps_dir = tmp_path / "ddp-resume" / "steps"
    assert first["steps_dir"] == str(steps_dir)
    for rank in (0, 1):
        records = step_records(steps_dir, rank)
        assert [record["step"] for record in records] == list(range(6))
        assert all(
            set(record) == STEP_KEYS and (record["rank"], record["device"]) == (rank, "cpu") for record in records
        )
        # Two ranks: every step waits on a gradient all-reduce.
        assert all(record["comm_s"] > 0 and record["step_s"] > record["comm_s"] for record in records)
    assert sorted(load_bundle(steps_dir.parent).steps) == [0, 1]
    first_model = read_model(Path(first["checkpoint"]))
    assert first_model.config["d_model"] == 64

    second = train(jobs, tmp_path, "ddp-resume", epochs=2, steps_per_epoch=6, checkpoint_every=3)
    # Continued at step 6 from the checkpoint: six more steps, not twelve from scratch.
    assert (second["global_step"], second["epoch"]) == (12, 2)
    for rank in (0, 1):
        assert [record["step"] for record in step_records(steps_dir, rank)] == list(range(12))
    assert second["val_loss"] < first["val_loss"]
    assert second["checkpoint"] != first["checkpoint"]


def test_fsdp_run_shards_the_model_and_times_its_collectives(jobs, tmp_path):
    summary = train(jobs, tmp_path, "fsdp-short", strategy="fsdp", epochs=1, steps_per_epoch=4, checkpoint_every=4)
    assert (summary["strategy"], summary["global_step"]) == ("fsdp", 4)
    for rank in (0, 1):
        records = step_records(tmp_path / "fsdp-short" / "steps", rank)
        assert len(records) == 4 and all(record["comm_s"] > 0 for record in records)
    # The gathered full state dict, loadable into the plain model.
    model = read_model(Path(summary["checkpoint"]))
    assert model(torch.zeros(2, 8, dtype=torch.long)).shape == (2, 8, model.config["vocab_size"])


SPACE = {
    "lr": {"loguniform": [1e-3, 1e-2]},
    "d_model": {"randint": [32, 48]},
    "epochs": 3,
    "steps_per_epoch": 5,
}


def test_sweep_tracks_nested_named_runs_and_registers_the_best_model(jobs, tmp_path):
    tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    argv = [
        "python", "-m", "workloads.sweep",
        "--trainable", TINY_TRANSFORMER.sweep.trainable,
        "--space", json.dumps(SPACE),
        "--trials", "4",
        "--metric", "val_loss", "--mode", "min", "--scheduler", "asha",
        "--tracking-uri", tracking_uri,
        "--experiment", "tiny-sweeps",
        "--model-name", "tiny-lm",
        "--sweep-id", "sweep-it1",
        "--storage-path", str(tmp_path / "ray"),
    ]  # fmt: skip
    summary = last_json(run_job(jobs, argv, {}))
    assert (summary["sweep"], summary["trials"], summary["completed"]) == ("sweep-it1", 4, 4)
    assert (summary["model"], summary["version"], summary["metric"]) == ("tiny-lm", "1", "val_loss")

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("tiny-sweeps")
    assert experiment.artifact_location == str(tmp_path / "mlartifacts")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [run for run in runs if run.info.run_id == summary["parent_run_id"]]
    assert parent.info.run_name == "sweep-it1"
    assert parent.data.tags["trainbot.sweep"] == "sweep-it1"
    assert parent.data.params == {name: json.dumps(value) for name, value in SPACE.items()}
    assert parent.data.metrics["val_loss"] == summary["value"]
    assert parent.data.tags["trainbot.model_version"] == "1"

    children = [run for run in runs if run.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 4 and len(runs) == 5
    for child in children:
        params = child.data.params
        assert child.info.run_name.split(" #")[0] == trial_name(
            {"lr": float(params["lr"]), "d_model": int(params["d_model"])}, ("lr", "d_model")
        )
        assert re.fullmatch(r"lr=0\.0\d+ d_model=\d\d( #\d)?", child.info.run_name)
        assert (tmp_path / "ray" / "sweep-it1" / dirname(child.info.run_name)).is_dir()
        history = client.get_metric_history(child.info.run_id, "val_loss")
        # One point per epoch reached (ASHA may stop a trial after its first).
        assert [metric.step for metric in history] == list(range(1, len(history) + 1))
    assert max(len(client.get_metric_history(child.info.run_id, "val_loss")) for child in children) == 3

    (best,) = [child for child in children if child.info.run_name == summary["best_trial"]]
    version = client.get_model_version("tiny-lm", "1")
    assert version.run_id == best.info.run_id
    assert version.tags == {
        "trainbot.sweep": "sweep-it1",
        "trainbot.trial": summary["best_trial"],
        "trainbot.metric": "val_loss",
        "trainbot.metric_value": repr(summary["value"]),
    }
    assert summary["value"] == min(metric.value for metric in client.get_metric_history(best.info.run_id, "val_loss"))
    # The model's files are under the experiment's artifact location, not some process's ./mlruns.
    logged = client.get_logged_model(version.source.removeprefix("models:/"))
    assert logged.artifact_location.startswith(experiment.artifact_location)
    mlflow.set_tracking_uri(tracking_uri)
    model = mlflow.pytorch.load_model("models:/tiny-lm/1")
    assert model.config["d_model"] == int(best.data.params["d_model"])
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, model.config["vocab_size"])
