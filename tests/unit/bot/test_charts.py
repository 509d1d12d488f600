"""The diagnosis chart from the example bundles, drawn by the real matplotlib: a panel of GPU activity where
the bundle has DCGM metrics (SM activity preferred), one of step phases per rank where it has step timings,
none at all (None) where it has neither; and matplotlib is not loaded until a chart is drawn."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys

import pytest
from PIL import Image

from bot.render.charts import (
    DPI,
    PANEL_HEIGHT_IN,
    PHASES,
    RUN_COLOURS,
    WIDTH_IN,
    comparison_chart,
    diagnosis_chart,
    gpu_activity,
)
from diagnosers.bundle import load_bundle
from tests.builders.step_files import write_steps
from tests.paths import EXAMPLES

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PHASE_COLOURS = {tuple(bytes.fromhex(colour.removeprefix("#"))) for _, _, colour in PHASES}


def image(png: bytes) -> Image.Image:
    assert png.startswith(PNG_SIGNATURE)
    assert 10_000 < len(png) < 1_000_000
    return Image.open(io.BytesIO(png)).convert("RGB")


def has_phase_bars(picture: Image.Image) -> bool:
    drawn = {colour for _, colour in picture.getcolors(maxcolors=1 << 20)}
    return PHASE_COLOURS.issubset(drawn)


@pytest.mark.parametrize(
    ("example", "metric", "panels"),
    [
        ("compute-bound", "DCGM_FI_PROF_SM_ACTIVE", 2),
        ("comm-bound-small-batch", "DCGM_FI_PROF_SM_ACTIVE", 2),
        ("straggler-throttled-gpu", "DCGM_FI_DEV_GPU_UTIL", 2),
        ("io-bound-dcgm-only", "DCGM_FI_DEV_GPU_UTIL", 1),
    ],
)
def test_a_bundle_with_metrics_gets_a_png_with_a_panel_for_each_kind_of_data(example, metric, panels):
    chosen, series = gpu_activity(load_bundle(EXAMPLES / example))
    assert chosen == metric  # SM activity where the bundle has it, utilisation otherwise
    assert all(len(one.times) == len(one.values) > 100 for one in series)
    picture = image(diagnosis_chart(EXAMPLES / example))
    assert picture.size == (WIDTH_IN * DPI, PANEL_HEIGHT_IN * DPI * panels)
    assert has_phase_bars(picture) == (panels == 2)


def test_step_timings_alone_get_the_step_phase_panel(tmp_path):
    shutil.copytree(EXAMPLES / "straggler-throttled-gpu" / "steps", tmp_path / "steps")
    picture = image(diagnosis_chart(tmp_path))
    assert picture.size == (WIDTH_IN * DPI, PANEL_HEIGHT_IN * DPI)
    assert has_phase_bars(picture)


@pytest.mark.parametrize("example", ["failed-gpu-oom", "failed-image-pull", "insufficient-evidence"])
def test_a_bundle_without_metrics_or_step_timings_gets_no_chart(example):
    assert diagnosis_chart(EXAMPLES / example) is None


def test_the_bot_loads_matplotlib_only_to_draw_a_chart():
    code = (
        "import sys, pathlib; import bot.slack.app; assert 'matplotlib' not in sys.modules; "
        "from bot.render.charts import diagnosis_chart; assert diagnosis_chart(pathlib.Path(sys.argv[1])); "
        "assert 'matplotlib' in sys.modules"
    )
    bundle = str(EXAMPLES / "compute-bound")
    result = subprocess.run(
        [sys.executable, "-c", code, bundle], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_two_runs_overlaid_get_one_panel_with_each_runs_colour(tmp_path):
    for run, step_s in (("a", 0.1), ("b", 0.15)):
        write_steps(tmp_path / run, ranks=2, step_s=step_s)
    runs = [(run, dict(load_bundle(tmp_path / run).steps)) for run in ("a", "b")]
    picture = image(comparison_chart(runs))
    assert picture.size == (WIDTH_IN * DPI, PANEL_HEIGHT_IN * DPI)
    drawn = {colour for _, colour in picture.getcolors(maxcolors=1 << 20)}
    assert {tuple(bytes.fromhex(colour.removeprefix("#"))) for colour in RUN_COLOURS} <= drawn
