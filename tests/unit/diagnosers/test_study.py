"""Why a study's curve bends, from its sizes together: the findings one run's rules cannot make."""

from pathlib import Path

from diagnosers.bundle import load_bundle
from diagnosers.engine import diagnose
from diagnosers.findings import COMM_BOUND, COMPUTE_BOUND, SMALL_BATCH
from diagnosers.scaling import ScalePoint, scale_table
from diagnosers.study import scale_point as measure
from diagnosers.study import study_findings
from tests.builders.step_files import write_steps


def point(folder: Path, workers: int, batch: int, **steps: float) -> ScalePoint:
    """A size of `workers` ranks whose step files are written as given, measured as the study measures it."""
    write_steps(folder, ranks=workers, samples=batch, **steps)  # type: ignore[arg-type]
    return measure(workers, 0, batch, dict(load_bundle(folder).steps), folder.name)


def strong_scaling_on_one_sample(tmp_path: Path, **two: float) -> list[ScalePoint]:
    """2 samples on one worker in 23 ms; split over two workers, one sample each, stepping as `two` says."""
    return [point(tmp_path / "one", 1, 2, step_s=0.023), point(tmp_path / "two", 2, 1, **two)]


def test_one_sample_a_worker_whose_all_reduce_grew_the_step_is_small_batch_and_comm_bound(tmp_path):
    points = strong_scaling_on_one_sample(tmp_path, step_s=0.052, comm_s=0.017)
    table = scale_table(points)
    found = {finding.id: finding for finding in study_findings(points, table)}
    assert found.keys() == {SMALL_BATCH, COMM_BOUND}
    small = found[SMALL_BATCH]
    assert "1 sample a step (2 samples at 1 worker)" in small.detail
    assert "0% of the step at 1 worker and 32% at 2 workers" in small.detail
    assert f"keep {table.rows[1].efficiency:.0%} of the ideal speedup" in small.detail
    assert "they added 17.0 ms to each step, while compute changed it by +12.5 ms and data loading by +0.0 ms" in (
        found[COMM_BOUND].detail
    )
    for finding in found.values():  # each size's median step, as its rank wrote it, from its own run
        assert [quote.source for quote in finding.evidence] == ["one/steps/rank-0.jsonl", "two/steps/rank-0.jsonl"]
        assert '"comm_s": 0.017' in finding.evidence[1].text


def test_a_small_batch_whose_step_grew_mostly_in_compute_is_not_called_comm_bound(tmp_path):
    # Two workers contending for two cores: compute grew by 25 ms, the all-reduce by 4 ms.
    points = strong_scaling_on_one_sample(tmp_path, step_s=0.052, comm_s=0.004)
    assert [finding.id for finding in study_findings(points, scale_table(points))] == [SMALL_BATCH]


def test_large_batches_whose_collectives_grew_are_comm_bound_only(tmp_path):
    points = [
        point(tmp_path / "one", 1, 64, step_s=0.1),
        point(tmp_path / "four", 4, 64, step_s=0.2, comm_s=0.09),
    ]
    found = study_findings(points, scale_table(points))
    assert [finding.id for finding in found] == [COMM_BOUND]
    assert found[0].title == "Communication-bound at 4 workers: collectives grew with the workers"


def test_collectives_that_did_not_grow_leave_the_point_to_its_own_rules(tmp_path):
    points = [
        point(tmp_path / "one", 1, 8, step_s=0.01, comm_s=0.001),
        point(tmp_path / "two", 2, 8, step_s=0.03, comm_s=0.003),
    ]
    table = scale_table(points)
    assert table.first_below == 2 and study_findings(points, table) == []


def test_a_study_that_kept_up_says_nothing(tmp_path):
    points = [point(tmp_path / "one", 1, 8, step_s=0.01), point(tmp_path / "two", 2, 8, step_s=0.011, comm_s=0.001)]
    table = scale_table(points)
    assert table.first_below is None and study_findings(points, table) == []


def test_the_studys_finding_replaces_the_points_own_of_its_id_and_decides_the_verdict(tmp_path):
    points = strong_scaling_on_one_sample(tmp_path, step_s=0.052, comm_s=0.017)
    across = study_findings(points, scale_table(points))
    own = diagnose(load_bundle(tmp_path / "two"))
    assert own.verdict == COMM_BOUND and all("grew with the workers" not in f.title for f in own.findings)
    studied = diagnose(load_bundle(tmp_path / "two"), beyond=across)
    assert [finding.id for finding in studied.findings] == [SMALL_BATCH, COMM_BOUND]
    assert studied.findings[1].title.endswith("collectives grew with the workers")
    assert studied.verdict == COMM_BOUND and "grew with the workers" in studied.summary


def test_a_point_compute_bound_on_its_own_keeps_its_verdict_with_the_small_batch_named_above_it(tmp_path):
    points = strong_scaling_on_one_sample(tmp_path, step_s=0.052, comm_s=0.004)
    studied = diagnose(load_bundle(tmp_path / "two"), beyond=study_findings(points, scale_table(points)))
    assert [finding.id for finding in studied.findings] == [SMALL_BATCH, COMPUTE_BOUND]
    assert studied.verdict == COMPUTE_BOUND
