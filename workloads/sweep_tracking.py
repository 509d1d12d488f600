"""A sweep's MLflow record, written from the Tune driver: parent run, nested trial runs, best model.

Everything is logged by the driver process (a Tune callback and the end of the sweep), so nothing
depends on trial workers reaching the tracking server or on files left on worker nodes: the best
model is rebuilt from its checkpoint in Tune's storage and logged from here.
Each call is one round trip: a trial's parameters and each result's metrics go in one log_batch.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID
from ray import tune
from ray.tune.result import (
    AUTO_RESULT_KEYS,
    DONE,
    EPISODES_THIS_ITER,
    EXPERIMENT_TAG,
    SHOULD_CHECKPOINT,
    TIMESTEPS_THIS_ITER,
    TRAINING_ITERATION,
    TRIAL_ID,
)

from workloads.model_checkpoint import has_model, read_model

if TYPE_CHECKING:
    from ray.tune.experiment import Trial
    from torch import nn

SWEEP_TAG = "trainbot.sweep"
TRIAL_TAG = "trainbot.trial"
TRIAL_ID_TAG = "trainbot.trial_id"
METRIC_TAG = "trainbot.metric"
METRIC_VALUE_TAG = "trainbot.metric_value"
MODE_TAG = "trainbot.mode"
TRAINABLE_TAG = "trainbot.trainable"
BEST_TRIAL_TAG = "trainbot.best_trial"
MODEL_NAME_TAG = "trainbot.model_name"
MODEL_VERSION_TAG = "trainbot.model_version"
MODEL_ARTIFACT = "model"
# What Tune adds to every result; the rest is what the trainable reported.
TUNE_RESULT_KEYS = frozenset(
    {*AUTO_RESULT_KEYS, DONE, EPISODES_THIS_ITER, EXPERIMENT_TAG, SHOULD_CHECKPOINT, TIMESTEPS_THIS_ITER, TRIAL_ID}
)


class TrialRun(NamedTuple):
    run_id: str
    name: str


class TrackingError(RuntimeError):
    """The MLflow side cannot be used as asked (e.g. the experiment is deleted); the message says why."""


def default_artifact_location(tracking_uri: str) -> str | None:
    """For a sqlite store, a folder beside the database (sqlite:////x/mlflow.db -> /x/mlartifacts).

    MLflow's own default for a new experiment on a sqlite store is ./mlruns under the current
    directory of whichever process creates it, which for a Ray job is a temporary folder.
    """
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    database = Path(tracking_uri.removeprefix(prefix).split("?", 1)[0])
    return str((database.parent / "mlartifacts").resolve())


def reported_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """The numbers a trainable reported in one Tune result, without Tune's own bookkeeping."""
    return {
        key: float(value)
        for key, value in result.items()
        if key not in TUNE_RESULT_KEYS and isinstance(value, int | float) and not isinstance(value, bool)
    }


class SweepTracker(tune.Callback):
    """The parent run of one sweep and, as a Tune callback, one nested child run per trial."""

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        sweep_id: str,
        metric: str,
        mode: Literal["min", "max"],
        artifact_location: str | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.sweep_id = sweep_id
        self.metric = metric
        self.mode = mode
        self._client: MlflowClient | None = None
        self.experiment_id = self._experiment_id(experiment, artifact_location)
        self.parent_run_id = ""
        # By Tune trial id: its MLflow run, and the best `metric` value it reported.
        self.trial_runs: dict[str, TrialRun] = {}
        self.best_values: dict[str, float] = {}

    # Tune pickles its run config (callbacks included) into tuner.pkl; a client holds a database engine.
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def _experiment_id(self, name: str, artifact_location: str | None) -> str:
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            try:
                return self.client.create_experiment(
                    name, artifact_location=artifact_location or default_artifact_location(self.tracking_uri)
                )
            except MlflowException:
                # Created meanwhile by another sweep: use theirs.
                experiment = self.client.get_experiment_by_name(name)
                if experiment is None:
                    raise
        if experiment.lifecycle_stage != "active":
            raise TrackingError(f"MLflow experiment {name!r} is deleted; restore it or choose another --experiment")
        return experiment.experiment_id

    def start_parent(self, space: Mapping[str, Any], trainable: str) -> str:
        """The sweep's run, named after the sweep, with the space as its parameters."""
        tags = {SWEEP_TAG: self.sweep_id, METRIC_TAG: self.metric, MODE_TAG: self.mode, TRAINABLE_TAG: trainable}
        run = self.client.create_run(self.experiment_id, run_name=self.sweep_id, tags=tags)
        self.parent_run_id = run.info.run_id
        params = [Param(name, json.dumps(value)) for name, value in space.items()]
        self.client.log_batch(self.parent_run_id, params=params)
        return self.parent_run_id

    def finish_parent(self, best: tuple[str, float] | None, registered: tuple[str, str] | None = None) -> None:
        """Close the sweep's run: with the best (trial id, value) and the registered (model, version),
        or FAILED when there is no best trial."""
        if best is None:
            self.client.set_terminated(self.parent_run_id, RunStatus.to_string(RunStatus.FAILED))
            return
        trial_id, value = best
        tags = {BEST_TRIAL_TAG: self.trial_runs[trial_id].name}
        if registered:
            tags |= {MODEL_NAME_TAG: registered[0], MODEL_VERSION_TAG: registered[1]}
        self.client.log_batch(
            self.parent_run_id,
            metrics=[Metric(self.metric, value, _now_ms(), 0)],
            tags=[RunTag(key, text) for key, text in tags.items()],
        )
        self.client.set_terminated(self.parent_run_id, RunStatus.to_string(RunStatus.FINISHED))

    # -- Tune callback: called in the driver's event loop, so each does as few round trips as it can.

    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        if trial.trial_id in self.trial_runs:  # restarted after a failure: same run
            return
        name = str(trial)
        run = self.client.create_run(
            self.experiment_id,
            run_name=name,
            tags={
                MLFLOW_PARENT_RUN_ID: self.parent_run_id,
                SWEEP_TAG: self.sweep_id,
                TRIAL_TAG: name,
                TRIAL_ID_TAG: trial.trial_id,
            },
        )
        self.trial_runs[trial.trial_id] = TrialRun(run.info.run_id, name)
        params = [Param(key, str(value)) for key, value in trial.config.items()]
        self.client.log_batch(run.info.run_id, params=params)

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict[str, Any], **info: Any
    ) -> None:
        metrics = reported_metrics(result)
        # Per-epoch history: the trainable's "epoch" is the step when it reports one.
        step = int(metrics.get("epoch", result.get(TRAINING_ITERATION, 0)))
        timestamp = _now_ms()
        batch = [Metric(key, value, timestamp, step) for key, value in metrics.items()]
        self.client.log_batch(self.trial_runs[trial.trial_id].run_id, metrics=batch)
        value = metrics.get(self.metric)
        if value is not None and math.isfinite(value):
            previous = self.best_values.get(trial.trial_id, value)
            self.best_values[trial.trial_id] = min(previous, value) if self.mode == "min" else max(previous, value)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._end_trial(trial, RunStatus.FINISHED)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._end_trial(trial, RunStatus.FAILED)

    def _end_trial(self, trial: Trial, status: int) -> None:
        if trial.trial_id in self.trial_runs:
            self.client.set_terminated(self.trial_runs[trial.trial_id].run_id, RunStatus.to_string(status))

    # -- the end of the sweep

    def log_best_model(self, trial_id: str, value: float, checkpoint_folder: Path, model_name: str) -> str | None:
        """Log the model in `checkpoint_folder` in the trial's run, register it as a new version of
        `model_name` tagged with the sweep, trial and `value`; the version.

        None (and a note on stderr) when the checkpoint does not hold a model this driver can rebuild.
        """
        if not has_model(checkpoint_folder):
            print(
                f"sweep: the best checkpoint {checkpoint_folder} holds no model.json; no model registered",
                file=sys.stderr,
            )
            return None
        import mlflow  # noqa: PLC0415
        import mlflow.pytorch  # noqa: PLC0415

        model = read_model(checkpoint_folder)
        mlflow.set_tracking_uri(self.tracking_uri)
        # MLflow 3 files a logged model under the fluent API's current experiment, not its run's:
        # left at the default it lands in ./mlruns of whatever directory the driver runs in.
        mlflow.set_experiment(experiment_id=self.experiment_id)
        logged = mlflow.pytorch.log_model(
            model,
            name=MODEL_ARTIFACT,
            run_id=self.trial_runs[trial_id].run_id,
            # Pinned from this environment: MLflow would otherwise infer them by loading the model in a subprocess.
            pip_requirements=mlflow.pytorch.get_default_pip_requirements(),
            # Pickled with its defining package (code_paths); MLflow's default "pt2" export needs an
            # example input, which a generic checkpoint does not carry.
            serialization_format="pickle",
            code_paths=[_source_of(model)],
        )
        tags = {
            SWEEP_TAG: self.sweep_id,
            TRIAL_TAG: self.trial_runs[trial_id].name,
            METRIC_TAG: self.metric,
            METRIC_VALUE_TAG: repr(value),
        }
        version = mlflow.register_model(logged.model_uri, model_name, tags=tags)
        return str(version.version)


def _source_of(model: nn.Module) -> str:
    """The package (or module file) that defines the model's class, so the logged model loads without this repo."""
    top = importlib.import_module(type(model).__module__.split(".")[0])
    source = Path(top.__file__ or "")
    return str(source.parent if hasattr(top, "__path__") else source)


def _now_ms() -> int:
    return int(time.time() * 1000)
