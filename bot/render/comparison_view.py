"""Two runs compared, as text: the CLI prints it and Slack shows it in a code block."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actions.evidence.comparing import LIVE

if TYPE_CHECKING:
    from actions.evidence.comparing import ComparedRun, RunComparison
    from diagnosers.comparison import RunPace


def comparison_text(comparison: RunComparison) -> str:
    """A table of the two runs (A, B) and what differs between them."""
    a, b = comparison.a, comparison.b
    rows: list[tuple[str, str, str]] = [
        ("run", a.name, b.name),
        ("workers x GPUs", _shape(a), _shape(b)),
        ("samples/s", _rate(a.pace), _rate(b.pace)),
        ("mean step", f"{a.pace.mean_step_s * 1000:.1f} ms", f"{b.pace.mean_step_s * 1000:.1f} ms"),
        ("data/compute/comm", _shares(a.pace), _shares(b.pace)),
        ("steady steps", str(a.pace.steps), str(b.pace.steps)),
    ]
    for metric in sorted(a.metrics.keys() | b.metrics.keys()):
        rows.append((metric, _number(a.metrics.get(metric)), _number(b.metrics.get(metric))))
    rows.append(("verdict", a.verdict, b.verdict))
    width = [max(len(row[column]) for row in rows) for column in range(2)]
    lines = [f"{label:<{width[0]}}  {left:<{width[1]}}  {right}".rstrip() for label, left, right in rows]
    if comparison.speedup is not None:
        lines.append(f"B runs at {comparison.speedup:.2f}x A's pace")
    if not a.metrics and not b.metrics:
        lines.append("final metrics: MLflow has none for these runs (a sweep's trials log them; a plain job does not)")
    differ = comparison.params.differ
    same = f"{comparison.params.same} the same"
    if differ:
        shown = ", ".join(f"{name} {_value(left)} -> {_value(right)}" for name, (left, right) in differ.items())
        lines.append(f"parameters: {len(differ)} differ ({shown}); {same}")
    else:
        lines.append(f"parameters: none differ; {same}")
    lines += [f"A: {a.summary}", f"B: {b.summary}"]
    lines += [
        f"{side}'s verdict is from {run.verdict_from}" for side, run in (("A", a), ("B", b)) if run.verdict_from != LIVE
    ]
    return "\n".join(lines)


def _shape(run: ComparedRun) -> str:
    return f"{run.workers} x {run.gpus_per_worker} ({run.backend})"


def _rate(pace: RunPace) -> str:
    return "not counted" if pace.samples_per_s is None else f"{pace.samples_per_s:,.1f}"


def _shares(pace: RunPace) -> str:
    return " / ".join(f"{share:.0%}" for share in (pace.data_share, pace.compute_share, pace.comm_share))


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _value(value: Any) -> str:
    return "(unset)" if value is None else str(value)
