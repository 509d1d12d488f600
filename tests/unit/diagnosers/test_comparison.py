"""Two runs' step files, loaded as the bundle loader reads them, compared by the pure comparison."""

import pytest

from diagnosers.bundle import load_bundle
from diagnosers.comparison import param_diff, run_pace, speedup
from tests.builders.step_files import write_steps


def test_a_runs_pace_is_its_ranks_samples_over_their_steady_step_time_and_its_phase_shares(tmp_path):
    write_steps(tmp_path, ranks=2, step_s=0.1, data_s=0.02, comm_s=0.03, samples=32)
    pace = run_pace(dict(load_bundle(tmp_path).steps))
    assert pace is not None
    # Rank 0 steps in 100 ms, rank 1 in 101 ms: 320 + 316.8 samples a second.
    assert pace.samples_per_s == pytest.approx(32 / 0.1 + 32 / 0.101)
    assert pace.rank_step_s == pytest.approx({0: 0.1, 1: 0.101})
    assert pace.steps == 2 * 18  # the first tenth of each rank's steps is warm-up, left out
    assert pace.data_share == pytest.approx(0.04 / 0.201)
    assert pace.comm_share == pytest.approx(0.06 / 0.201)
    assert pace.compute_share == pytest.approx(1 - 0.10 / 0.201)


def test_the_second_run_is_set_against_the_first(tmp_path):
    write_steps(tmp_path / "a", ranks=1, step_s=0.1, samples=32)
    write_steps(tmp_path / "b", ranks=2, step_s=0.1, comm_s=0.05, samples=16)
    a, b = (run_pace(dict(load_bundle(tmp_path / run).steps)) for run in ("a", "b"))
    assert a is not None and b is not None
    assert speedup(a, b) == pytest.approx((16 / 0.1 + 16 / 0.101) / 320)
    assert b.comm_share == pytest.approx(0.1 / 0.201)


def test_without_sample_counts_the_pace_is_by_step_time(tmp_path):
    write_steps(tmp_path / "a", ranks=1, step_s=0.2, samples=0)
    write_steps(tmp_path / "b", ranks=1, step_s=0.1, samples=0)
    a, b = (run_pace(dict(load_bundle(tmp_path / run).steps)) for run in ("a", "b"))
    assert a is not None and b is not None
    assert a.samples_per_s is None
    assert speedup(a, b) == pytest.approx(2.0)


def test_no_step_records_is_no_pace():
    assert run_pace({}) is None
    assert run_pace({0: []}) is None


def test_parameters_that_differ_and_the_count_of_the_same():
    diff = param_diff({"lr": 0.001, "batch": 32, "strategy": "ddp"}, {"lr": 0.01, "batch": 32, "seed": 1})
    assert diff.differ == {"lr": (0.001, 0.01), "seed": (None, 1), "strategy": ("ddp", None)}
    assert diff.same == 1
