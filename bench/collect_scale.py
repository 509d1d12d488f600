"""Collecting a 64-GPU, 6-hour job from a real Prometheus: one query per metric against one per GPU.

Backfills 8 hosts x 8 GPUs of every configured DCGM metric at 15 s resolution into a Prometheus
on a loopback port (Debian's prometheus/promtool), times collect_prometheus over the window, and
prints its HTTP requests, bytes saved and seconds next to the request count of querying each GPU
on its own (64 x metrics).

    .venv/bin/python -m bench.collect_scale
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import requests

from diagnosers.collect.bundle_writer import BundleWriter
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.prometheus import collect_prometheus
from diagnosers.collect.target import CollectConfig, Target
from tests.builders.scenarios import START, STEP_S, Gpu, dcgm_labels
from tests.servers import prometheus_server as server

HOSTS, PER_HOST = 8, 8
WINDOW_S = 6 * 3600


def _series(metrics: tuple[str, ...]) -> Iterator[server.Series]:
    samples = [(START + i * STEP_S, f"{50 + i % 7}") for i in range(WINDOW_S // STEP_S + 1)]
    for metric in metrics:
        for host in range(HOSTS):
            for index in range(PER_HOST):
                yield {"__name__": metric, **dcgm_labels(Gpu(f"node-{host}", index))}, samples


@contextmanager
def _counting_requests() -> Iterator[list[str]]:
    """Every URL the collector asks for, counted where requests sends it."""
    urls: list[str] = []
    original = requests.Session.request

    def request(session: requests.Session, method: str, url: str, *args: object, **kwargs: object) -> object:
        urls.append(url)
        return original(session, method, url, *args, **kwargs)

    with mock.patch.object(requests.Session, "request", request):
        yield urls


def main() -> int:
    if reason := server.missing_binaries():
        print(f"skipped: {reason}")
        return 0
    config = CollectConfig(request_timeout_s=60.0, deadline_s=300.0)
    target = Target(
        job="bench",
        backend="kuberay",
        pod_regex="node-.*-worker",
        start=datetime.fromtimestamp(START, UTC),
        end=datetime.fromtimestamp(START + WINDOW_S, UTC),
    )
    with tempfile.TemporaryDirectory(prefix="collect-scale-") as scratch:
        root = Path(scratch)
        began = time.perf_counter()
        server.backfill(server.write_openmetrics(root / "series.om", _series(config.metrics)), root / "data")
        print(
            f"backfilled {HOSTS * PER_HOST} GPUs x {len(config.metrics)} metrics, "
            f"{WINDOW_S // 3600} h at {STEP_S} s, in {time.perf_counter() - began:.1f} s"
        )
        with server.running_prometheus(root / "data") as url, _counting_requests() as urls:
            writer = BundleWriter(root / "bundle")
            began = time.perf_counter()
            collect_prometheus(target, replace(config, prometheus_url=url), writer, Deadline(config.deadline_s))
            seconds = time.perf_counter() - began
        files = list((root / "bundle" / "prometheus").glob("*.json"))
        saved = sum(path.stat().st_size for path in files)
        points = max(len(item["values"]) for path in files for item in json.loads(path.read_bytes())["data"]["result"])
        status = writer.sources()["prometheus"]
    per_gpu = HOSTS * PER_HOST * len(config.metrics)
    print(f"status {status}")
    print(
        f"collect_prometheus: {len(urls)} HTTP requests, {saved / 1e6:.1f} MB saved, {seconds:.2f} s, "
        f"at most {points} points a series"
    )
    print(f"per-GPU queries would need {per_gpu} requests: {per_gpu / len(urls):.0f}x as many")
    return 0


if __name__ == "__main__":
    sys.exit(main())
