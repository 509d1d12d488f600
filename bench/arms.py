"""What a bench that times two arms, alternating, prints of each arm: its median wall time and every run's."""

from __future__ import annotations

import statistics


def median_line(label: str, walls: list[float]) -> str:
    """`label`, the median of `walls` and each wall, in seconds: `driver  median 45.52 s  [46.12, 44.54, 45.52]`."""
    return f"{label} median {statistics.median(walls):.2f} s  [" + ", ".join(f"{wall:.2f}" for wall in walls) + "]"
