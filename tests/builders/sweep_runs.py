"""A sweep's runs in MLflow, written the way the sweep driver writes them (a parent run, a child run per trial)."""

from __future__ import annotations

from mlflow import MlflowClient
from mlflow.entities import Metric
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from actions.jobs import sweep_progress as reader

SWEEP = "tiny-transformer-sweep-abc123"


def write_sweep(uri: str, values: dict[str, tuple[str, float | None]], mode: str = "min", done: bool = False) -> None:
    client = MlflowClient(uri)
    experiment = client.create_experiment("trainbot/tiny-transformer")
    tags = {reader.SWEEP_TAG: SWEEP, reader.METRIC_TAG: "val_loss", reader.MODE_TAG: mode}
    if done:
        tags |= {reader.MODEL_NAME_TAG: "tiny-transformer", reader.MODEL_VERSION_TAG: "3"}
    parent = client.create_run(experiment, run_name=SWEEP, tags=tags).info.run_id
    other = client.create_run(experiment, run_name="another-sweep", tags={reader.SWEEP_TAG: "another-sweep"})
    client.log_metric(other.info.run_id, "val_loss", 0.0001)
    for name, (status, value) in values.items():
        run = client.create_run(
            experiment,
            run_name=name,
            tags={MLFLOW_PARENT_RUN_ID: parent, reader.SWEEP_TAG: SWEEP, reader.TRIAL_TAG: name},
        ).info.run_id
        client.log_param(run, "lr", "0.001")
        if value is not None:
            client.log_batch(run, metrics=[Metric("val_loss", value, 0, 0)])
        if status != "RUNNING":
            client.set_terminated(run, status)
