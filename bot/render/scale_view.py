"""A scaling study as text: the CLI prints it and Slack will show it in a code block."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.render.report import render_text

if TYPE_CHECKING:
    from actions.evidence.studying import PointDiagnosis
    from actions.jobs.scaling import StudyResult
    from diagnosers.scaling import ScaleRow

# Said of a study whose points ran at once: each size's figures are what it did beside the others.
COMPETED = ", all points at once (they competed)"
HEADER = ("workers", "GPUs", "batch/worker", "samples/s", "speedup", "efficiency", "data/compute/comm", "job")


def study_text(result: StudyResult, explained: PointDiagnosis | None = None) -> str:
    """The study's headline, its table (a row a size launched), where efficiency fell under the threshold, and the
    diagnosis of the point that explains the curve (where there is one)."""
    study, table = result.study, result.table
    lines = [
        f"{study.id}: {study.template} at {', '.join(map(str, study.sizes))} workers, "
        f"{study.batch_mode} batch, {study.steps} measured steps a point{COMPETED if study.parallel else ''} "
        f"on {study.backend}: {study.status.value}"
    ]
    rows = [HEADER, *(_cells(row, job) for row, job in zip(table.rows, study.jobs, strict=False))]
    width = [max(len(row[column]) for row in rows) for column in range(len(HEADER))]
    lines += ["  ".join(cell.rjust(width[i]) if i < 6 else cell.ljust(width[i]) for i, cell in enumerate(row)).rstrip()
              for row in rows]  # fmt: skip
    if study.reason:
        lines.append(f"ended early: {study.reason}")
    if table.first_below is not None:
        lines.append(f"efficiency falls under {table.threshold:g} at {table.first_below} workers")
    else:
        lines.append(f"efficiency stays at or above {table.threshold:g} at every measured size")
    if table.comm_growth is not None:
        shares = ", ".join(f"{_percent(row.comm_share)} at {row.workers}" for row in table.rows if row.measured)
        lines.append(f"comm share of the step: {shares} ({table.comm_growth * 100:+.0f} points)")
    if explained is not None and explained.across:
        titles = {found.id: found.title for found in explained.diagnosis.findings}
        lines.append("why, from the sizes together: " + "; ".join(f"{one} ({titles[one]})" for one in explained.across))
    if explained is not None:
        lines += [
            "",
            f"the {explained.workers}-worker point ({explained.job}), because {explained.why} "
            f"(diagnosed from {explained.verdict_from}):",
            render_text(explained.diagnosis),
        ]
    return "\n".join(lines)


def _cells(row: ScaleRow, job: str) -> tuple[str, ...]:
    shares = (
        "/".join(_percent(share) for share in (row.data_share, row.compute_share, row.comm_share))
        if row.measured
        else "not measured"
    )
    return (
        str(row.workers),
        str(row.gpus_per_worker),
        str(row.per_worker_batch),
        _number(row.samples_per_s, ".1f"),
        _number(row.speedup, ".2f", "x"),
        _number(row.efficiency, ".2f"),
        shares,
        job,
    )


def _number(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"
