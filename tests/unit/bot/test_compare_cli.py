"""`trainbot compare` over two jobs recorded in a real sqlite state store, their step timings under runs/."""

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

from actions.jobs.job import JobState, JobStatus
from actions.jobs.records import Store
from tests.builders.job_records import launch, open_store
from tests.builders.step_files import RUN_A, RUN_B, record_two_runs, write_steps
from tests.builders.sweep_runs import SWEEP, write_sweep
from tests.paths import TRAINBOT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    record_two_runs(store_of(tmp_path), tmp_path)
    return tmp_path


def store_of(data_dir: Path) -> Store:
    return open_store(f"sqlite:///{data_dir / 'state.db'}")


def compare(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    return subprocess.run([str(TRAINBOT), "compare", *args], capture_output=True, text=True, timeout=120,
                          env={**clean, "TRAINBOT_DATA_DIR": str(data_dir)}, check=False)  # fmt: skip


def test_two_jobs_side_by_side_with_what_differs_and_both_verdicts(data_dir):
    result = compare(data_dir, "tiny-transformer-a", "tiny-transformer-b")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:7] == [
        f"run                {RUN_A}  {RUN_B}",
        "workers x GPUs     1 x 1 (local)            2 x 1 (local)",
        "samples/s          320.0                    212.6",
        "mean step          100.0 ms                 150.5 ms",
        "data/compute/comm  10% / 90% / 0%           7% / 47% / 47%",
        "steady steps       18                       36",
        "verdict            compute-bound            comm-bound",
    ]
    assert "B runs at 0.66x A's pace" in lines
    assert "parameters: 1 differ (strategy ddp -> fsdp); 1 the same" in lines
    assert "final metrics: MLflow has none for these runs (a sweep's trials log them; a plain job does not)" in lines
    # No Ray head answers for this data directory: no live evidence, and the output says so.
    assert lines[-1].startswith(
        f"B's verdict is from its step timings alone (no local Ray head answers for the data directory {data_dir}"
    )


def test_json_gives_the_numbers_and_the_chart_is_a_png_file(data_dir, tmp_path):
    chart = tmp_path / "compare.png"
    result = compare(data_dir, RUN_A, RUN_B, "-o", "json", "--chart", str(chart))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["a"]["pace"]["samples_per_s"] == pytest.approx(320.0)
    assert document["b"]["pace"]["comm_share"] == pytest.approx(0.14 / 0.301)
    assert document["b"]["pace"]["rank_step_s"] == pytest.approx({"0": 0.15, "1": 0.151})
    assert (document["a"]["verdict"], document["b"]["verdict"]) == ("compute-bound", "comm-bound")
    assert document["params"] == {"differ": {"strategy": ["ddp", "fsdp"]}, "same": 1}
    assert document["speedup"] == pytest.approx((16 / 0.15 + 16 / 0.151) / 320)
    assert chart.read_bytes().startswith(PNG_MAGIC)


def test_two_trials_of_a_sweep_with_their_final_metric_from_mlflow(data_dir):
    sweep = dataclasses.replace(launch(SWEEP, params={"trials": 2}), kind="sweep")
    store_of(data_dir).record_launch(sweep, "local", JobStatus(SWEEP, JobState.SUCCEEDED))
    write_sweep(
        f"sqlite:///{data_dir / 'mlflow.db'}",
        {"train_fn_1_00000": ("FINISHED", 0.5), "train_fn_1_00001": ("FINISHED", 0.25)},
    )
    for trial, step_s in (("train_fn_1_00000_0_lr=0.001", 0.1), ("train_fn_1_00001_1_lr=0.01", 0.2)):
        write_steps(data_dir / "runs" / SWEEP / trial, ranks=1, step_s=step_s)
    result = compare(data_dir, f"{SWEEP}/train_fn_1_00000", f"{SWEEP}/train_fn_1_00001", "-o", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["a"]["name"], document["b"]["name"]) == (f"{SWEEP}/train_fn_1_00000", f"{SWEEP}/train_fn_1_00001")
    assert (document["a"]["metrics"], document["b"]["metrics"]) == ({"val_loss": 0.5}, {"val_loss": 0.25})
    assert document["speedup"] == pytest.approx(0.5)
    assert document["a"]["verdict_from"] == "its step timings alone"
    text = compare(data_dir, f"{SWEEP}/train_fn_1_00000", f"{SWEEP}/train_fn_1_00001").stdout
    assert "val_loss           0.5" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nosuchjob", RUN_B), "trainbot: no job named or starting with 'nosuchjob'; `trainbot jobs` lists them\n"),
        ((RUN_A, "tiny-transformer-a"), f"trainbot: {RUN_A} and tiny-transformer-a are the same run ({RUN_A}); "
                                         "name two different runs\n"),
        ((RUN_A, f"{RUN_B}/trial"), f"trainbot: {RUN_B} is not a sweep, so it has no trial 'trial'; give a job's name "
                                    "(or its first letters), or SWEEP/TRIAL for one trial of a sweep\n"),
        ((RUN_A, RUN_B, "--chart", "/no/such/folder/c.png"),
         "trainbot: --chart /no/such/folder/c.png: give a file name in a folder that exists\n"),
    ],
)  # fmt: skip
def test_a_mistake_is_one_line(data_dir, args, message):
    result = compare(data_dir, *args)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message)


def test_a_job_that_wrote_no_step_timings_is_one_line(data_dir):
    store_of(data_dir).record_launch(
        launch("tiny-transformer-ccc333"), "local", JobStatus("tiny-transformer-ccc333", JobState.FAILED)
    )
    result = compare(data_dir, RUN_A, "tiny-transformer-c")
    assert result.returncode == 2
    assert result.stderr == (
        f"trainbot: tiny-transformer-ccc333 wrote no step timings ({data_dir}/runs/tiny-transformer-ccc333/steps has "
        "none): compare runs that trained a while\n"
    )


def test_a_kuberay_job_says_its_step_timings_are_not_on_this_machine(data_dir):
    name = "tiny-transformer-ddd444"
    store_of(data_dir).record_launch(launch(name), "kuberay", JobStatus(name, JobState.SUCCEEDED))
    result = compare(data_dir, RUN_A, name)
    assert (result.returncode, result.stderr) == (
        2,
        f"trainbot: {name} ran on kuberay: its step timings are not on this machine; compare local runs\n",
    )


def test_help_says_how_to_name_a_sweeps_trial(data_dir):
    assert "SWEEP/TRIAL names one trial of a sweep" in " ".join(compare(data_dir, "--help").stdout.split())
