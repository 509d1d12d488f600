"""A scaling study shown: its text table (a row a size, where efficiency fell, how the comm share grew) and its
chart (throughput and efficiency against workers, drawn by the real matplotlib)."""

import io
from datetime import UTC, datetime

from PIL import Image

from actions.evidence.studying import PointDiagnosis
from actions.jobs.scaling import StudyResult
from actions.jobs.studies import Study, StudyStatus
from bot.render.charts import DPI, PANEL_HEIGHT_IN, RUN_COLOURS, WIDTH_IN, scale_chart
from bot.render.scale_view import study_text
from diagnosers.bundle import load_bundle
from diagnosers.comparison import run_pace
from diagnosers.engine import diagnose
from diagnosers.scaling import ScalePoint, scale_table
from diagnosers.study import study_findings
from tests.builders.step_files import write_steps

AT = datetime(2026, 11, 24, 15, 0, tzinfo=UTC)


def result_of(tmp_path, status=StudyStatus.SUCCEEDED, reason="", parallel=False) -> StudyResult:
    write_steps(tmp_path / "1", ranks=1, step_s=0.1, data_s=0.01, samples=32)
    write_steps(tmp_path / "2", ranks=2, step_s=0.11, data_s=0.01, comm_s=0.05, samples=16)
    points = [ScalePoint(n, 0, 32 // n, run_pace(dict(load_bundle(tmp_path / str(n)).steps))) for n in (1, 2)]
    points.append(ScalePoint(4, 0, 8, None))
    study = Study(
        id="tiny-transformer-scale-abc123", template="tiny-transformer", requester="alice", backend="local",
        params={"batch_size": 32}, sizes=(1, 2, 4), jobs=("tt-one", "tt-two", "tt-four"), gpus_per_worker=0,
        batch_mode="global", steps=40, parallel=parallel, status=status, reason=reason, created_at=AT, updated_at=AT,
    )  # fmt: skip
    return StudyResult(study, tuple(points), scale_table(points))


def test_the_table_has_a_row_a_size_and_says_where_efficiency_fell_and_how_comm_grew(tmp_path):
    text = study_text(result_of(tmp_path, StudyStatus.FAILED, "the 4-worker point (tt-four) ended FAILED: oom"))
    lines = text.splitlines()
    assert lines[0] == (
        "tiny-transformer-scale-abc123: tiny-transformer at 1, 2, 4 workers, global batch, "
        "40 measured steps a point on local: failed"
    )
    assert lines[1].split() == ["workers", "GPUs", "batch/worker", "samples/s", "speedup", "efficiency",
                                "data/compute/comm", "job"]  # fmt: skip
    assert lines[2].split() == ["1", "0", "32", "320.0", "1.00x", "1.00", "10%/90%/0%", "tt-one"]
    assert lines[3].split()[:6] == ["2", "0", "16", f"{16 / 0.11 + 16 / 0.111:.1f}", "0.90x", "0.45"]
    assert lines[4].split() == ["4", "0", "8", "-", "-", "-", "not", "measured", "tt-four"]
    assert lines[5] == "ended early: the 4-worker point (tt-four) ended FAILED: oom"
    assert lines[6] == "efficiency falls under 0.8 at 2 workers"
    assert lines[7] == "comm share of the step: 0% at 1, 45% at 2 (+45 points)"


def test_a_parallel_study_says_its_points_ran_at_once_and_competed(tmp_path):
    result = result_of(tmp_path, parallel=True)
    assert study_text(result).splitlines()[0] == (
        "tiny-transformer-scale-abc123: tiny-transformer at 1, 2, 4 workers, global batch, "
        "40 measured steps a point, all points at once (they competed) on local: succeeded"
    )
    apart, together = scale_chart(result.table), scale_chart(result.table, parallel=True)
    assert Image.open(io.BytesIO(together)).size == Image.open(io.BytesIO(apart)).size
    # The title says so: the same chart, more ink where the top panel's title is.
    assert _title_ink(together) > _title_ink(apart)


def _title_ink(png: bytes) -> int:
    picture = Image.open(io.BytesIO(png)).convert("L")
    band = picture.crop((0, 0, picture.width, DPI // 4))
    return sum(1 for value in band.getdata() if value < 128)


def test_the_chart_draws_throughput_and_efficiency_in_two_panels(tmp_path):
    png = scale_chart(result_of(tmp_path).table)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    picture = Image.open(io.BytesIO(png)).convert("RGB")
    assert picture.size == (WIDTH_IN * DPI, PANEL_HEIGHT_IN * 2 * DPI)
    drawn = {colour for _, colour in picture.getcolors(maxcolors=1 << 20)}
    # The measured line and the threshold line, each in its colour.
    assert {tuple(bytes.fromhex(colour.removeprefix("#"))) for colour in RUN_COLOURS} <= drawn


def test_the_point_that_explains_the_curve_is_shown_with_its_diagnosis(tmp_path):
    result = result_of(tmp_path)
    diagnosis = diagnose(load_bundle(tmp_path / "2"))
    explained = PointDiagnosis("tt-two", 2, "its efficiency 0.45 is under 0.8", diagnosis, "live evidence")
    text = study_text(result, explained)
    assert "\nthe 2-worker point (tt-two), because its efficiency 0.45 is under 0.8 (diagnosed from live evidence):\n" \
        f"verdict: {diagnosis.verdict}\n" in text  # fmt: skip


def test_what_the_sizes_together_say_is_named_above_the_points_diagnosis(tmp_path):
    result = result_of(tmp_path)
    across = study_findings(list(result.points), result.table)
    diagnosis = diagnose(load_bundle(tmp_path / "2"), beyond=across)
    explained = PointDiagnosis(
        "tt-two", 2, "its efficiency 0.45 is under 0.8", diagnosis, "live evidence", ("small-batch", "comm-bound")
    )
    lines = study_text(result, explained).splitlines()
    assert lines[lines.index("comm share of the step: 0% at 1, 45% at 2 (+45 points)") + 1] == (
        "why, from the sizes together: small-batch (Batch per worker too small for data parallelism); "
        "comm-bound (Communication-bound at 2 workers: collectives grew with the workers)"
    )
    assert "why, from the sizes" not in study_text(result, PointDiagnosis("tt-two", 2, "", diagnosis, "live"))
