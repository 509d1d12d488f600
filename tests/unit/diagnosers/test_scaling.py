"""A scaling study's table from each size's step files, loaded as the bundle loader reads them."""

from pathlib import Path

import pytest

from diagnosers.bundle import load_bundle
from diagnosers.comparison import run_pace
from diagnosers.scaling import ScalePoint, scale_table
from tests.builders.step_files import write_steps


def measured(folder: Path, workers: int, batch: int, **steps: float) -> ScalePoint:
    """A point of `workers` ranks whose step files are written as given, measured as the study measures it."""
    write_steps(folder, ranks=workers, samples=batch, **steps)  # type: ignore[arg-type]
    return ScalePoint(workers, 0, batch, run_pace(dict(load_bundle(folder).steps)))


def test_speedup_and_efficiency_are_against_the_smallest_size_and_the_split_is_each_sizes(tmp_path):
    # Weak scaling: each worker keeps its 32 samples; the step grows from 100 ms as the comm phase does.
    points = [
        measured(tmp_path / "4", 4, 32, step_s=0.2, data_s=0.01, comm_s=0.1),
        measured(tmp_path / "1", 1, 32, step_s=0.1, data_s=0.01),
        measured(tmp_path / "2", 2, 32, step_s=0.12, data_s=0.01, comm_s=0.02),
    ]
    table = scale_table(points, threshold=0.8)
    assert [row.workers for row in table.rows] == [1, 2, 4]
    one, two, four = table.rows
    assert one.samples_per_s == pytest.approx(320)
    assert one.speedup == pytest.approx(1) and one.efficiency == pytest.approx(1)
    two_rate = 32 / 0.12 + 32 / 0.121  # rank r steps a millisecond slower per r
    assert two.speedup == pytest.approx(two_rate / 320)
    assert two.efficiency == pytest.approx(two_rate / 320 / 2)
    four_rate = sum(32 / (0.2 + rank / 1000) for rank in range(4))
    assert four.efficiency == pytest.approx(four_rate / 320 / 4)
    assert one.comm_share == 0 and two.comm_share == pytest.approx(0.04 / 0.241)
    assert four.comm_share == pytest.approx(0.4 / 0.806)
    assert four.data_share == pytest.approx(0.04 / 0.806)
    assert four.compute_share == pytest.approx(1 - 0.44 / 0.806)
    # 2 workers keep 83% of the ideal, 4 keep 50%: the first size under 0.8 is 4.
    assert table.first_below == 4
    assert table.comm_growth == pytest.approx(0.4 / 0.806)


def test_the_threshold_decides_the_first_size_under_it(tmp_path):
    points = [
        measured(tmp_path / "1", 1, 32, step_s=0.1),
        measured(tmp_path / "2", 2, 32, step_s=0.12, comm_s=0.02),
    ]
    assert scale_table(points, threshold=0.8).first_below is None
    assert scale_table(points, threshold=0.9).first_below == 2


def test_strong_scaling_halves_the_batch_and_shows_the_run_slower_with_two(tmp_path):
    # The global batch of 32 split over two workers: each step barely shortens while its comm phase appears.
    points = [
        measured(tmp_path / "1", 1, 32, step_s=0.1),
        measured(tmp_path / "2", 2, 16, step_s=0.11, comm_s=0.06),
    ]
    table = scale_table(points)
    assert table.rows[1].speedup is not None and table.rows[1].speedup < 1
    assert table.first_below == 2
    assert table.comm_growth == pytest.approx(0.12 / 0.221)


def test_a_point_without_a_pace_keeps_its_row_empty_and_the_rest_measure_against_the_smallest_measured(tmp_path):
    points = [
        ScalePoint(1, 0, 32, None),
        measured(tmp_path / "2", 2, 32, step_s=0.1),
        measured(tmp_path / "4", 4, 32, step_s=0.1),
    ]
    table = scale_table(points)
    failed, two, four = table.rows
    assert not failed.measured and failed.speedup is None and failed.samples_per_s is None
    assert two.speedup == pytest.approx(1)
    # Against 2 workers, 4 are ideal at twice the pace.
    assert four.efficiency == pytest.approx(four.speedup / 2)
    assert table.to_dict()["rows"][0]["efficiency"] is None


def test_steps_that_count_no_samples_are_paced_by_every_workers_batch_per_step(tmp_path):
    points = [
        measured(tmp_path / "1", 1, 0, step_s=0.1),
        measured(tmp_path / "2", 2, 0, step_s=0.1),
    ]
    points = [ScalePoint(point.workers, 0, 32, point.pace) for point in points]
    table = scale_table(points)
    assert table.rows[0].samples_per_s == pytest.approx(320)
    assert table.rows[1].samples_per_s == pytest.approx(64 / 0.1005)  # the mean step over both ranks


def test_one_size_has_no_comm_growth(tmp_path):
    table = scale_table([measured(tmp_path, 1, 32, step_s=0.1)])
    assert table.comm_growth is None and table.first_below is None
