"""Sweep progress read back from a real sqlite MLflow store, written the way the sweep driver writes it."""

from __future__ import annotations

import pytest

from actions.errors import BadRequest
from actions.jobs import sweep_progress as reader
from actions.jobs.sweep_progress import sweep_progress
from tests.builders.sweep_runs import SWEEP, write_sweep


def test_the_tags_read_are_the_ones_the_sweep_driver_writes():
    from workloads import sweep_tracking as tracking  # noqa: PLC0415 - the driver's side imports Ray Tune

    for name in ("SWEEP_TAG", "TRIAL_TAG", "METRIC_TAG", "MODE_TAG", "MODEL_NAME_TAG", "MODEL_VERSION_TAG"):
        assert getattr(reader, name) == getattr(tracking, name), name


def test_progress_counts_finished_and_running_trials_and_ranks_the_best(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_sweep(
        uri, {"t1": ("FINISHED", 2.5), "t2": ("FAILED", None), "t3": ("RUNNING", 1.75), "t4": ("FINISHED", 3.0)}
    )
    progress = sweep_progress(uri, "trainbot/tiny-transformer", SWEEP, trials=10)
    assert (progress.trials, progress.finished, progress.running) == (10, 3, 1)
    assert progress.best is not None and (progress.best.name, progress.best.value) == ("t3", 1.75)
    assert [run.name for run in progress.ranked()] == ["t3", "t1", "t4"]  # another sweep's better run is not counted
    assert progress.best.params == {"lr": "0.001"}
    assert (progress.model, progress.version) == ("", "")


def test_max_mode_ranks_the_highest_first_and_the_registered_version_is_read(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_sweep(uri, {"t1": ("FINISHED", 0.5), "t2": ("FINISHED", 0.9)}, mode="max", done=True)
    progress = sweep_progress(uri, "trainbot/tiny-transformer", SWEEP, trials=2)
    assert [run.name for run in progress.ranked()] == ["t2", "t1"]
    assert (progress.model, progress.version) == ("tiny-transformer", "3")


def test_a_sweep_whose_driver_has_not_started_has_no_runs(tmp_path):
    progress = sweep_progress(f"sqlite:///{tmp_path / 'mlflow.db'}", "trainbot/tiny-transformer", SWEEP, trials=4)
    assert (progress.runs, progress.best, progress.finished) == ([], None, 0)


def test_a_name_that_is_not_a_job_name_never_reaches_the_search_filter(tmp_path):
    with pytest.raises(BadRequest, match="not a job name"):
        sweep_progress(f"sqlite:///{tmp_path / 'mlflow.db'}", "trainbot/x", "x' OR '1'='1", trials=1)
