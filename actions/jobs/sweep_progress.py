"""Where a sweep stands, read from the MLflow runs its driver writes (workloads/sweep_tracking.py): one
parent run named after the sweep and one nested run per trial, all tagged with the sweep's name.

The tags are the driver's; tests/unit/actions/test_sweep_progress.py holds them equal, since the driver runs in
the cluster and this side may not import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from actions.errors import BadRequest, Unavailable
from actions.jobs.job import DNS_1035

SWEEP_TAG = "trainbot.sweep"
TRIAL_TAG = "trainbot.trial"
METRIC_TAG = "trainbot.metric"
MODE_TAG = "trainbot.mode"
MODEL_NAME_TAG = "trainbot.model_name"
MODEL_VERSION_TAG = "trainbot.model_version"
# More trials than this are counted but not listed.
MAX_LISTED = 1000


@dataclass(frozen=True)
class TrialRun:
    name: str
    status: str  # MLflow's: RUNNING, FINISHED, FAILED, KILLED, SCHEDULED
    value: float | None  # the metric's latest value
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepProgress:
    sweep: str
    trials: int  # as asked; the runs appear as Tune starts them
    metric: str
    mode: Literal["min", "max"]
    runs: list[TrialRun]
    model: str = ""  # registered at the end: the best trial's model and version
    version: str = ""

    def counted(self, *statuses: str) -> int:
        return sum(1 for run in self.runs if run.status in statuses)

    @property
    def finished(self) -> int:
        return self.counted("FINISHED", "FAILED", "KILLED")

    @property
    def running(self) -> int:
        return self.counted("RUNNING")

    def ranked(self) -> list[TrialRun]:
        """Trials with a value, best first."""
        scored = [run for run in self.runs if run.value is not None and math.isfinite(run.value)]
        return sorted(scored, key=lambda run: run.value if self.mode == "min" else -run.value)  # type: ignore[operator]

    @property
    def best(self) -> TrialRun | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None


def prepare_tracking(tracking_uri: str) -> None:
    """Create the tracking store's tables now, before a sweep's driver and this process's first read
    would race to create them on a new sqlite store (one of the two then fails)."""
    from mlflow import MlflowClient  # noqa: PLC0415

    MlflowClient(tracking_uri=tracking_uri).search_experiments(max_results=1)


def sweep_progress(tracking_uri: str, experiment: str, sweep: str, trials: int) -> SweepProgress:
    """The sweep's runs now. Before its driver starts there are none (and the mode is unknown: min)."""
    from mlflow import MlflowClient  # noqa: PLC0415 - MLflow loads on first use
    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    if not DNS_1035.match(sweep):  # it goes into a search filter
        raise BadRequest(f"{sweep!r} is not a job name trainbot gives")
    client = MlflowClient(tracking_uri=tracking_uri)
    try:
        found = client.get_experiment_by_name(experiment)
        runs = (
            client.search_runs([found.experiment_id], f"tags.`{SWEEP_TAG}` = '{sweep}'", max_results=MAX_LISTED)
            if found
            else []
        )
    except MlflowException as error:
        raise Unavailable(f"MLflow at {tracking_uri} did not answer for sweep {sweep}: {error.message}") from None
    parent = next((run for run in runs if TRIAL_TAG not in run.data.tags), None)
    tags = parent.data.tags if parent else {}
    metric = tags.get(METRIC_TAG, "")
    return SweepProgress(
        sweep=sweep,
        trials=trials,
        metric=metric,
        mode="max" if tags.get(MODE_TAG) == "max" else "min",
        runs=[
            TrialRun(run.data.tags[TRIAL_TAG], run.info.status, run.data.metrics.get(metric), dict(run.data.params))
            for run in runs
            if TRIAL_TAG in run.data.tags
        ],
        model=tags.get(MODEL_NAME_TAG, ""),
        version=tags.get(MODEL_VERSION_TAG, ""),
    )
