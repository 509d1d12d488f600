"""collect_prometheus against a real Prometheus holding the example bundles' series, and against outages.

Every example's prometheus/ series are backfilled into one server, each scenario moved to its own
day so the job's window separates them, next to a neighbouring job's copy of the same series on
other nodes at the same time, which the job's pod or host filter must leave out.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest

from bot.http.server import in_thread
from diagnosers.collect.bundle_writer import BundleWriter
from diagnosers.collect.collector import SourceUnavailable
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.prometheus import collect_prometheus
from diagnosers.collect.target import CollectConfig, Target
from diagnosers.engine import diagnose_path
from tests.builders.scenarios import START, STEP_S
from tests.paths import EXAMPLES
from tests.servers import prometheus_server as server

pytestmark = pytest.mark.integration

DAY_S = 86_400
MAX_POINTS = 1000

RAY_HOST, RAY_NEIGHBOUR = "10.0.0.7", "10.0.0.8"
RAY_SHIFT_S = -10 * DAY_S


@dataclass(frozen=True)
class Scenario:
    name: str
    shift_s: int
    target: Target
    host_label: str = "Hostname"


def _moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _scenario(name: str, day: int, backend: str, host_label: str = "Hostname", **selection: object) -> Scenario:
    """The example on its own day (days back from the scenarios' START); the job's window is its 120 points."""
    shift_s = -day * DAY_S
    target = Target(
        job=name,
        backend=backend,  # type: ignore[arg-type]
        start=_moment(START + shift_s),
        end=_moment(START + shift_s + 119 * STEP_S),
        **selection,  # type: ignore[arg-type]
    )
    return Scenario(name, shift_s, target, host_label)


# Both filters: kuberay's pod regex and local's hosts (under either host label name the examples use).
SCENARIOS = (
    _scenario("comm-bound-small-batch", 1, "kuberay", pod_regex=r"node-\d+-worker"),
    _scenario("io-bound-dcgm-only", 2, "local", hosts=("node-0", "node-1")),
    _scenario("compute-bound", 3, "local", host_label="hostname", hosts=("node-0", "node-1")),
    _scenario("straggler-throttled-gpu", 4, "kuberay", pod_regex="node-0-worker"),
)


def _shifted(series: server.Series, shift_s: int, rename: tuple[str, str] | None = None) -> server.Series:
    labels, samples = series
    if rename:
        labels = {key: value.replace(*rename) for key, value in labels.items()}
    return labels, [(timestamp + shift_s, value) for timestamp, value in samples]


def _example_series(scenario: Scenario) -> Iterator[server.Series]:
    """The example's series on the scenario's day, and the neighbour job's copy on other nodes."""
    for path in sorted((EXAMPLES / scenario.name / "prometheus").glob("*.json")):
        for series in server.matrix_series(json.loads(path.read_text())):
            yield _shifted(series, scenario.shift_s)
            yield _shifted(series, scenario.shift_s, rename=("node-", "other-"))


def _ray_series() -> Iterator[server.Series]:
    """A cluster without dcgm-exporter for our job: Ray's node metrics only, plus a neighbour's DCGM."""
    samples = [(START + RAY_SHIFT_S + i * STEP_S, "42") for i in range(120)]
    for ip in (RAY_HOST, RAY_NEIGHBOUR):
        for metric in ("ray_node_gpus_utilization", "ray_node_gram_used"):
            for gpu in ("0", "1"):
                labels = {"__name__": metric, "ip": ip, "GpuIndex": gpu, "SessionName": "session_2025_11_22"}
                yield labels, samples
    yield {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "elsewhere", "gpu": "0"}, samples


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if reason := server.missing_binaries():
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("prometheus")
    series = [one for scenario in SCENARIOS for one in _example_series(scenario)]
    openmetrics = server.write_openmetrics(folder / "series.om", [*series, *_ray_series()])
    server.backfill(openmetrics, folder / "data")
    with server.running_prometheus(folder / "data") as url:
        yield url


def _config(url: str, **overrides: object) -> CollectConfig:
    return CollectConfig(**{"prometheus_url": url, "max_points": MAX_POINTS, **overrides})  # type: ignore[arg-type]


def _collect(target: Target, config: CollectConfig, folder: Path) -> BundleWriter:
    writer = BundleWriter(folder)
    collect_prometheus(target, config, writer, Deadline(config.deadline_s))
    return writer


def _label_sets(folder: Path) -> dict[str, set[frozenset[tuple[str, str]]]]:
    """Metric file -> the label sets of its series; asserts each file is a whole matrix response."""
    found = {}
    for path in sorted((folder / "prometheus").glob("*.json")):
        document = json.loads(path.read_text())
        assert document["status"] == "success"
        assert document["data"]["resultType"] == "matrix"
        found[path.name] = {frozenset(item["metric"].items()) for item in document["data"]["result"]}
    return found


def _most_points(folder: Path) -> int:
    documents = [json.loads(path.read_text()) for path in (folder / "prometheus").glob("*.json")]
    return max(len(item["values"]) for document in documents for item in document["data"]["result"])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.name)
def test_collected_series_match_the_example(prometheus_url, tmp_path, scenario):
    writer = _collect(scenario.target, _config(prometheus_url, host_label=scenario.host_label), tmp_path)

    assert writer.sources() == {"prometheus": "ok"}
    assert _label_sets(tmp_path) == _label_sets(EXAMPLES / scenario.name)
    assert _most_points(tmp_path) <= MAX_POINTS


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.name)
def test_collected_bundle_gives_the_example_diagnosis(prometheus_url, tmp_path, scenario):
    """End to end: the example with its metrics replaced by collected ones is diagnosed the same."""
    example = EXAMPLES / scenario.name
    collected = tmp_path / scenario.name
    shutil.copytree(example, collected, ignore=lambda folder, _: ["prometheus"] if Path(folder) == example else [])
    _collect(scenario.target, _config(prometheus_url, host_label=scenario.host_label), collected)

    expected, got = diagnose_path(example), diagnose_path(collected)

    assert got.verdict == expected.verdict
    assert [finding.id for finding in got.findings] == [finding.id for finding in expected.findings]


def test_the_step_keeps_every_series_within_max_points(prometheus_url, tmp_path):
    """The run's 120 samples at 15 s, asked for in at most 50 points: the step must widen to 60 s."""
    scenario = SCENARIOS[-1]
    _collect(scenario.target, _config(prometheus_url, max_points=50), tmp_path)

    assert _label_sets(tmp_path) == _label_sets(EXAMPLES / scenario.name)
    assert 25 <= _most_points(tmp_path) <= 50


def test_without_dcgm_series_ray_node_metrics_are_collected(prometheus_url, tmp_path):
    start = START + RAY_SHIFT_S
    target = Target(job="job", backend="local", start=_moment(start), end=_moment(start + 119 * STEP_S))
    writer = _collect(replace(target, hosts=(RAY_HOST,)), _config(prometheus_url), tmp_path)

    assert writer.sources() == {"prometheus": "ok"}
    found = _label_sets(tmp_path)
    assert set(found) == {"ray_node_gpus_utilization.json", "ray_node_gram_used.json"}
    assert {dict(labels)["ip"] for sets in found.values() for labels in sets} == {RAY_HOST}
    assert all(len(sets) == 2 for sets in found.values())


def test_a_job_without_series_says_what_to_check(prometheus_url, tmp_path):
    target = replace(SCENARIOS[1].target, hosts=("nowhere",))
    writer = _collect(target, _config(prometheus_url), tmp_path)

    status = writer.sources()["prometheus"]
    assert status.startswith("error: no DCGM or Ray series match Hostname=~")
    assert "TRAINBOT_PROMETHEUS_HOST_LABEL" in status
    assert not (tmp_path / "prometheus").exists()


def test_a_bad_query_reports_prometheus_error_text(prometheus_url, tmp_path):
    target = replace(SCENARIOS[0].target, pod_regex="node-(")
    with pytest.raises(
        SourceUnavailable, match=r"^error: Prometheus answered HTTP 400: bad_data: .*error parsing regexp"
    ):
        _collect(target, _config(prometheus_url), tmp_path)


def test_no_url_is_not_configured(tmp_path):
    writer = _collect(SCENARIOS[0].target, CollectConfig(), tmp_path)

    assert writer.sources() == {"prometheus": "not-configured"}
    assert not (tmp_path / "prometheus").exists()


def test_a_closed_port_is_unreachable(tmp_path):
    url = f"http://127.0.0.1:{server.free_port()}"
    with pytest.raises(SourceUnavailable, match=rf"^unreachable: {url}: Connection refused$"):
        _collect(SCENARIOS[0].target, _config(url), tmp_path)


class _Forbidding(http.server.BaseHTTPRequestHandler):
    authorizations: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.authorizations.append(self.headers.get("Authorization"))
        self.send_response(403)
        self.send_header("Content-Length", "9")
        self.end_headers()
        self.wfile.write(b"Forbidden")

    def log_message(self, *_: object) -> None:
        pass


def test_a_forbidden_answer_names_the_token_setting(tmp_path):
    with (
        in_thread(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forbidding)) as url,
        pytest.raises(SourceUnavailable) as raised,
    ):
        _collect(SCENARIOS[0].target, _config(url, prometheus_token="s3cret"), tmp_path)

    assert str(raised.value) == ("error: Prometheus refused the request (HTTP 403): check TRAINBOT_PROMETHEUS_TOKEN")
    assert _Forbidding.authorizations == ["Bearer s3cret"]


@pytest.fixture
def hanging_url() -> Iterator[str]:
    """A server that accepts connections (the kernel completes them) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_a_hanging_server_is_unreachable_after_the_request_timeout(hanging_url, tmp_path):
    began = time.monotonic()
    with pytest.raises(SourceUnavailable, match=rf"^unreachable: {hanging_url}: no answer within 1 s$"):
        _collect(SCENARIOS[0].target, _config(hanging_url, request_timeout_s=1.0), tmp_path)

    assert time.monotonic() - began < 3


def test_a_hanging_server_never_holds_past_the_deadline(hanging_url, tmp_path):
    writer = BundleWriter(tmp_path)
    began = time.monotonic()
    with pytest.raises(SourceUnavailable, match=r"no answer within 0\.5 s$"):
        collect_prometheus(SCENARIOS[0].target, _config(hanging_url), writer, Deadline(0.5))

    assert time.monotonic() - began < 2


class _Answering(http.server.BaseHTTPRequestHandler):
    """Answers each GET with 200 and the next of `bodies`, as it is."""

    bodies: ClassVar[list[bytes]] = []

    def do_GET(self) -> None:
        body = self.bodies.pop(0)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_the_response_is_saved_byte_for_byte(tmp_path, monkeypatch):
    """PrometheusConnect hands back only its parse of `data.result`; the bundle keeps what Prometheus sent."""
    body = b'{"status" : "success",\n "data":{"resultType":"matrix",'
    body += b'"result":[{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL"},"values":[[1,"1.50"]]}]}, "warnings":["w"]}'
    discovery = b'{"status":"success","data":["DCGM_FI_DEV_GPU_UTIL"]}'
    monkeypatch.setattr(_Answering, "bodies", [discovery, body])
    with in_thread(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)) as url:
        _collect(SCENARIOS[0].target, _config(url, metrics=("DCGM_FI_DEV_GPU_UTIL",)), tmp_path)

    assert (tmp_path / "prometheus" / "DCGM_FI_DEV_GPU_UTIL.json").read_bytes() == body


def test_an_answer_that_is_not_prometheus_json_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(_Answering, "bodies", [b"<html>a login page</html>"])
    with (
        in_thread(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)) as url,
        pytest.raises(SourceUnavailable, match=r"^error: not a Prometheus answer from .*: <html>a login page</html>$"),
    ):
        _collect(SCENARIOS[0].target, _config(url), tmp_path)
