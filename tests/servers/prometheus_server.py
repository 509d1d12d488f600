"""A real Prometheus on a loopback port, holding series backfilled with promtool.

Series go in as OpenMetrics text (`promtool tsdb create-blocks-from openmetrics`), so tests query
the same TSDB and HTTP API a cluster's Prometheus serves. Debian's `prometheus` package (2.42)
provides both binaries; CI installs it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.servers.processes import free_port, serving

PROMETHEUS = "prometheus"
PROMTOOL = "promtool"
INSTALL_HINT = "needs Debian's prometheus and promtool: apt-get install -y prometheus"

# One series: its labels (with __name__) and its samples as (unix seconds, value text).
Series = tuple[Mapping[str, str], Sequence[tuple[float, str]]]


def missing_binaries() -> str:
    """Why the helper cannot run here ("" when both binaries are on PATH)."""
    missing = [name for name in (PROMETHEUS, PROMTOOL) if shutil.which(name) is None]
    return f"{' and '.join(missing)} not found: {INSTALL_HINT}" if missing else ""


def matrix_series(document: Mapping[str, object]) -> list[Series]:
    """The series of a query_range (matrix) response, as the example bundles store them."""
    result = document["data"]["result"]  # type: ignore[index]
    return [(item["metric"], [(float(t), str(v)) for t, v in item["values"]]) for item in result]


def write_openmetrics(path: Path, series: Iterable[Series]) -> Path:
    """OpenMetrics text: each metric family contiguous under its `# TYPE`, samples in time order."""
    families: dict[str, list[Series]] = {}
    for labels, samples in series:
        families.setdefault(labels["__name__"], []).append((labels, samples))
    with path.open("w") as out:
        for name, members in families.items():
            out.write(f"# TYPE {name} gauge\n")
            for labels, samples in members:
                text = _labels_text(labels)
                out.writelines(f"{name}{text} {value} {timestamp:.3f}\n" for timestamp, value in sorted(samples))
        out.write("# EOF\n")
    return path


def backfill(openmetrics: Path, data_dir: Path) -> None:
    """Blocks for the samples in `openmetrics` under `data_dir`, where Prometheus loads them at start."""
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data_dir)],
        check=True,
        capture_output=True,
        timeout=600,
    )


@contextmanager
def running_prometheus(data_dir: Path, scrape_configs: str = "[]") -> Iterator[str]:
    """Serve `data_dir` on a free loopback port; yields the base URL once /-/ready answers.

    With no `scrape_configs` (YAML) the server only serves what was backfilled.
    """
    config = data_dir.parent / f"{data_dir.name}-prometheus.yml"
    config.write_text(f"global:\n  evaluation_interval: 1h\nscrape_configs: {scrape_configs}\n")
    log = data_dir.parent / f"{data_dir.name}-prometheus.log"
    port = free_port()
    command = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={data_dir}",
        f"--web.listen-address=127.0.0.1:{port}",
        # Backfilled samples are months old: keep them whatever today's date is.
        "--storage.tsdb.retention.time=100y",
    ]
    url = f"http://127.0.0.1:{port}"
    with serving(command, log, f"{url}/-/ready"):
        yield url


def _labels_text(labels: Mapping[str, str]) -> str:
    pairs = ",".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in labels.items() if key != "__name__"
    )
    return f"{{{pairs}}}" if pairs else ""
