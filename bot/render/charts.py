"""The chart under a diagnosis: how busy each GPU was over time, and where each rank's step time went.

Drawn from the same bundle the diagnosis came from, as a PNG for Slack. matplotlib loads only here, on
first use, and draws on a Figure of its own with the Agg canvas: no pyplot state shared between threads.
"""

from __future__ import annotations

import io
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from diagnosers.bundle import load_bundle
from diagnosers.evidence import Evidence, Series, StepRecord
from diagnosers.rules.measures import SM_ACTIVE, UTILISATION_METRICS, StepPhases, gpu_key, step_phases

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from diagnosers.scaling import ScaleTable

# SM activity says how much of the GPU computes; utilisation only that some kernel ran (NCCL's count too).
ACTIVITY_SCALES: dict[str, float] = {SM_ACTIVE: 1.0, **dict(UTILISATION_METRICS)}
WIDTH_IN, PANEL_HEIGHT_IN, DPI = 9.0, 3.4, 100
# Past this many GPUs a legend hides the lines; the title says how many there are instead.
MAX_LEGEND = 16
# A line has at most this many points: a 6-hour run at 15 s is 1,440 samples, far more than 900 pixels.
MAX_POINTS = 1000
# Each phase of a step: its name on the chart, the StepRecord field and its colour.
# Each run's colour where two are overlaid.
RUN_COLOURS = ("#3274a1", "#e1812c")
PHASES = (("data", "data_s", "#e1812c"), ("collectives", "comm_s", "#3274a1"), ("compute", "compute_s", "#3a923a"))


def diagnosis_chart(bundle: Path) -> bytes | None:
    """A PNG with a panel of GPU activity per GPU over time and one of step phases per rank, as far as the
    bundle has DCGM (or Ray) metrics and step timings; None when it has neither."""
    evidence = load_bundle(bundle)
    metric, series = gpu_activity(evidence)
    phases = step_phases(evidence)
    if not series and phases is None:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - heavy, and only for charts
    from matplotlib.figure import Figure  # noqa: PLC0415

    panels = int(bool(series)) + int(phases is not None)
    figure = Figure(figsize=(WIDTH_IN, PANEL_HEIGHT_IN * panels), dpi=DPI, layout="constrained")
    axes = iter(figure.subplots(panels, 1, squeeze=False)[:, 0])
    if series:
        _draw_activity(next(axes), metric, series)
    if phases is not None:
        _draw_phases(next(axes), phases)
    png = io.BytesIO()
    FigureCanvasAgg(figure).print_png(png)
    return png.getvalue()


def gpu_activity(evidence: Evidence) -> tuple[str, list[Series]]:
    """SM activity per GPU where the bundle has it, else the most direct utilisation metric it has."""
    return evidence.metric(*ACTIVITY_SCALES)


def _draw_activity(axes: Axes, metric: str, series: list[Series]) -> None:
    start = min(one.times[0] for one in series)
    percent = 100.0 / ACTIVITY_SCALES[metric]
    for one in sorted(series, key=gpu_key):
        stride = -(-len(one.values) // MAX_POINTS)
        minutes = [(at - start) / 60 for at in one.times[::stride]]
        axes.plot(minutes, [value * percent for value in one.values[::stride]], linewidth=1, label=gpu_key(one))
    axes.set_title(f"{metric} per GPU ({len(series)} GPUs)", fontsize=10)
    axes.set_xlabel("minutes since the first sample")
    axes.set_ylabel("%")
    axes.set_ylim(0, 105)
    axes.grid(alpha=0.3)
    if len(series) <= MAX_LEGEND:
        _legend_beside(axes)


def _draw_phases(axes: Axes, phases: StepPhases) -> None:
    ranks = sorted(phases.per_rank)
    bottom = [0.0] * len(ranks)
    for phase, field, colour in PHASES:
        ms = [statistics.fmean(getattr(record, field) for record in phases.per_rank[rank]) * 1000 for rank in ranks]
        axes.bar([str(rank) for rank in ranks], ms, bottom=bottom, color=colour, label=phase)
        bottom = [below + height for below, height in zip(bottom, ms, strict=True)]
    axes.set_title("Step phases per rank (mean of the steady steps)", fontsize=10)
    axes.set_xlabel("rank")
    axes.set_ylabel("ms per step")
    axes.grid(axis="y", alpha=0.3)
    _legend_beside(axes)


def _legend_beside(axes: Axes) -> None:
    axes.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))


def comparison_chart(runs: list[tuple[str, dict[int, list[StepRecord]]]]) -> bytes:
    """A PNG overlaying each run's step time per rank over the steps: one colour per run, one line per rank."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - heavy, and only for charts
    from matplotlib.figure import Figure  # noqa: PLC0415

    figure = Figure(figsize=(WIDTH_IN, PANEL_HEIGHT_IN), dpi=DPI, layout="constrained")
    axes = figure.subplots()
    for colour, (name, steps) in zip(RUN_COLOURS, runs, strict=False):
        for rank, records in sorted(steps.items())[:MAX_LEGEND]:
            ordered = sorted(records, key=lambda record: record.step)
            shown = ordered[:: -(-len(ordered) // MAX_POINTS)]
            axes.plot([record.step for record in shown], [record.step_s * 1000 for record in shown],
                      color=colour, linewidth=1.5, label=f"{name} rank {rank}")  # fmt: skip
    axes.set_title("Step time per rank", fontsize=10)
    axes.set_xlabel("step")
    axes.set_ylabel("ms per step")
    axes.grid(alpha=0.3)
    _legend_beside(axes)
    png = io.BytesIO()
    FigureCanvasAgg(figure).print_png(png)
    return png.getvalue()


def scale_chart(table: ScaleTable, parallel: bool = False) -> bytes:
    """A PNG of a scaling study: samples a second against workers with the ideal (linear from the smallest
    measured size), and efficiency against workers with the threshold; only measured sizes are drawn. A
    `parallel` study's points ran at once, and its chart says so."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - heavy, and only for charts
    from matplotlib.figure import Figure  # noqa: PLC0415

    rows = [row for row in table.rows if row.samples_per_s is not None and row.efficiency is not None]
    figure = Figure(figsize=(WIDTH_IN, PANEL_HEIGHT_IN * 2), dpi=DPI, layout="constrained")
    pace, efficiency = figure.subplots(2, 1)
    workers = [row.workers for row in rows]
    if rows:
        base = rows[0]
        ideal = [base.samples_per_s * row.workers / base.workers for row in rows]  # type: ignore[operator]
        pace.plot(workers, ideal, color="grey", linestyle="--", label="ideal")
        pace.plot(workers, [row.samples_per_s for row in rows], color=RUN_COLOURS[0], marker="o", label="measured")
        efficiency.plot(workers, [1.0] * len(rows), color="grey", linestyle="--", label="ideal")
        efficiency.plot(workers, [row.efficiency for row in rows], color=RUN_COLOURS[0], marker="o", label="measured")
    efficiency.axhline(table.threshold, color=RUN_COLOURS[1], linewidth=1, label=f"threshold {table.threshold:g}")
    pace.set_title("Throughput against workers" + (" (all sizes at once, competing)" if parallel else ""), fontsize=10)
    pace.set_ylabel("samples / s")
    efficiency.set_title("Efficiency (speedup over N / N0) against workers", fontsize=10)
    efficiency.set_ylabel("efficiency")
    efficiency.set_ylim(0, 1.1)
    for axes in (pace, efficiency):
        axes.set_xlabel("workers")
        axes.set_xticks(workers)
        axes.grid(alpha=0.3)
        _legend_beside(axes)
    png = io.BytesIO()
    FigureCanvasAgg(figure).print_png(png)
    return png.getvalue()
