"""The job's GPU metrics from Prometheus: one query_range per metric, saved as Prometheus answered it.

Requests stay bounded by the metric count whatever the job's size: one discovery request asks which
of the configured metrics have series for the job's pods (or hosts) in its window, then one
query_range per metric found selects every GPU of the job at once. When no DCGM metric has a
series (a cluster without dcgm-exporter), Ray's own ray_node_* metrics are collected instead.

Queries go through prometheus-api-client's PrometheusConnect, on a requests session of ours that carries
the bearer token and the CA bundle, makes no retries (the client's default of 3 with back-off would hold
a hanging server for four timeouts) and cuts each request's timeout to the collection deadline. The
client returns only the parsed `data.result`; the bundle keeps the body exactly as Prometheus sent it,
which the session keeps too. The parse nobody uses is the client's cost: 30 ms per metric for 64 GPUs'
series of 1,000 points, 0.6 s and about 100 MB for 512 GPUs' (a 12 MB body); bench/collect_scale.py
took 0.60-0.80 s where plain `requests` took 0.37 s.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from diagnosers.collect.bundle_writer import NOT_CONFIGURED, OK, UNREACHABLE, BundleWriter, error_status
from diagnosers.collect.collector import SourceUnavailable
from diagnosers.collect.deadline import Deadline
from diagnosers.collect.target import CollectConfig, Target

SOURCE = "prometheus"
# A job still running (or with no known start) is looked at over its last hour.
OPEN_WINDOW = timedelta(hours=1)
# Steps people read at a glance and that line up with usual scrape intervals; beyond the last one,
# whole hours.
ROUND_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
# Ray's node metrics come from Ray's own endpoint, not dcgm-exporter: they name the node by `ip`,
# and on Kubernetes the scrape (PodMonitor) adds the Ray pod as `pod`, whatever dcgm-exporter's
# pod label was renamed to.
RAY_POD_LABEL = "pod"
RAY_HOST_LABEL = "ip"
TOKEN_SETTING = "TRAINBOT_PROMETHEUS_TOKEN"
MAX_BODY_QUOTE = 200
# requests' own default: a failed request fails at once, so only the timeout bounds it.
NO_RETRIES = Retry(total=0, read=False)


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step_s: int

    def params(self) -> dict[str, str]:
        return {"start": f"{self.start:.3f}", "end": f"{self.end:.3f}", "step": f"{self.step_s}s"}


def collect_prometheus(target: Target, config: CollectConfig, writer: BundleWriter, deadline: Deadline) -> None:
    """Save prometheus/<METRIC>.json for each configured metric that has series for the job."""
    if not config.prometheus_url:
        writer.source(SOURCE, NOT_CONFIGURED)
        return
    dcgm_matcher = job_matcher(target, config.pod_label, config.host_label)
    ray_matcher = job_matcher(target, RAY_POD_LABEL, RAY_HOST_LABEL)
    if not dcgm_matcher:
        writer.source(SOURCE, error_status(f"the job's {_what_selects(target)} are not known: no series to select"))
        return
    window = job_window(target, config.max_points)
    with _Session(config, deadline) as session:
        client = _Client(session, config.prometheus_url.rstrip("/"))
        present = client.metric_names([(config.metrics, dcgm_matcher), (config.fallback_metrics, ray_matcher)], window)
        metrics = [(name, dcgm_matcher) for name in config.metrics if name in present]
        # Ray's node metrics only stand in for DCGM: with both, they would only repeat coarser numbers.
        metrics = metrics or [(name, ray_matcher) for name in config.fallback_metrics if name in present]
        if not metrics:
            writer.source(SOURCE, error_status(_nothing_found(target, dcgm_matcher, window)))
            return
        for name, matcher in metrics:
            writer.write_bytes(f"prometheus/{name}.json", client.query_range(f"{name}{{{matcher}}}", window))
    writer.source(SOURCE, OK)


def job_matcher(target: Target, pod_label: str, host_label: str) -> str:
    """The label matcher that selects the job's series: `pod=~"ray-x-.*"` or `Hostname=~"a|b"`."""
    if target.backend == "kuberay":
        label, pattern = pod_label, target.pod_regex
    else:
        label, pattern = host_label, "|".join(re.escape(host) for host in target.hosts)
    return f"{label}=~{_promql_string(pattern)}" if pattern else ""


def job_window(target: Target, max_points: int, now: datetime | None = None) -> Window:
    """The job's window and the roundest step that keeps every series within `max_points` points."""
    end = target.end or now or datetime.now(UTC)
    start = target.start or end - OPEN_WINDOW
    seconds = max(0.0, (end - start).total_seconds())
    # A range of n steps holds n + 1 points.
    return Window(start.timestamp(), end.timestamp(), round_step(seconds / max(1, max_points - 1)))


def round_step(least_s: float) -> int:
    needed = max(1, math.ceil(least_s))
    return next((step for step in ROUND_STEPS_S if step >= needed), math.ceil(needed / 3600) * 3600)


class _Client:
    """Prometheus' HTTP API through PrometheusConnect, each answer checked and kept as it came."""

    def __init__(self, session: _Session, url: str) -> None:
        self._session = session
        self._url = url
        self._prometheus = PrometheusConnect(url, session=session, retry=NO_RETRIES)

    def metric_names(self, groups: list[tuple[tuple[str, ...], str]], window: Window) -> set[str]:
        """Which of the metrics have series under their filter in the window: one request for all."""
        matchers = [
            f"{{__name__=~{_promql_string('|'.join(map(re.escape, names)))},{matcher}}}"
            for names, matcher in groups
            if names
        ]
        params = {"match[]": matchers, "start": window.params()["start"], "end": window.params()["end"]}
        return set(self._answered(lambda: self._prometheus.get_label_values("__name__", params=params)) or [])

    def query_range(self, query: str, window: Window) -> bytes:
        """The query_range response's body, byte for byte."""
        start, end = (datetime.fromtimestamp(moment, UTC) for moment in (window.start, window.end))
        self._answered(lambda: self._prometheus.custom_query_range(query, start, end, window.params()["step"]))
        return self._session.last_response.content

    def _answered(self, query: Callable[[], Any]) -> Any:
        try:
            return query()
        except requests.Timeout:
            timeout = self._session.last_timeout_s
            raise SourceUnavailable(f"{UNREACHABLE}: {self._url}: no answer within {timeout:.2g} s") from None
        except requests.ConnectionError as error:
            raise SourceUnavailable(f"{UNREACHABLE}: {self._url}: {_reason(error)}") from None
        except PrometheusApiClientException:
            raise SourceUnavailable(_refusal(self._url, self._session.last_response)) from None
        except (ValueError, KeyError, TypeError):
            # HTTP 200 with a body that is not Prometheus' JSON: something else answers at the URL.
            body = _quote(self._session.last_response.content)
            raise SourceUnavailable(error_status(f"not a Prometheus answer from {self._url}: {body}")) from None


class _Session(requests.Session):
    """The token and CA bundle on every request, each request's timeout cut to the collection deadline, and
    the last response kept: PrometheusConnect gives back only what it parsed out of it."""

    def __init__(self, config: CollectConfig, deadline: Deadline) -> None:
        super().__init__()
        # True, False or a CA bundle path: requests takes all three as they are.
        self.verify = config.prometheus_verify
        if config.prometheus_token:
            self.headers["Authorization"] = f"Bearer {config.prometheus_token}"
        self._timeout_s = config.request_timeout_s
        self._deadline = deadline
        self.last_timeout_s = config.request_timeout_s
        self.last_response = requests.Response()

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        self.last_timeout_s = self._deadline.timeout(self._timeout_s)
        self.last_response = super().request(method, url, *args, **{**kwargs, "timeout": self.last_timeout_s})
        return self.last_response


def _refusal(url: str, response: requests.Response) -> str:
    """The bundle.json status for an answer that is not a success, in words that say what to do."""
    status = response.status_code
    if status in (requests.codes.unauthorized, requests.codes.forbidden):
        return error_status(f"Prometheus refused the request (HTTP {status}): check {TOKEN_SETTING}")
    error = _api_error(response.content)
    if error:
        return error_status(f"Prometheus answered HTTP {status}: {error}")
    # No Prometheus error body: a proxy or load balancer in front of it could not reach it.
    if status in (requests.codes.bad_gateway, requests.codes.service_unavailable, requests.codes.gateway_timeout):
        return f"{UNREACHABLE}: {url}: HTTP {status}"
    return error_status(f"Prometheus answered HTTP {status}: {_quote(response.content)}")


def _api_error(body: bytes) -> str:
    """Prometheus' own error text ("errorType: error"), or "" when the body is not its error JSON."""
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(document, dict) or document.get("status") != "error":
        return ""
    return f"{document.get('errorType', 'error')}: {document.get('error', '')}"


def _reason(error: requests.ConnectionError) -> str:
    """The OS' words ("Connection refused") out of urllib3's nested wrapping."""
    found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", str(error))
    return found.group(1).strip() if found else type(error).__name__


def _quote(body: bytes) -> str:
    return body[:MAX_BODY_QUOTE].decode("utf-8", "replace")


def _promql_string(value: str) -> str:
    # JSON string escapes (\\, \", \n, \uXXXX) are PromQL's, which follow Go's.
    return json.dumps(value, ensure_ascii=False)


def _what_selects(target: Target) -> str:
    return "pods (no RayCluster name)" if target.backend == "kuberay" else "hosts"


def _nothing_found(target: Target, matcher: str, window: Window) -> str:
    moment = datetime.fromtimestamp(window.start, UTC).isoformat(timespec="seconds")
    setting = "TRAINBOT_PROMETHEUS_POD_LABEL" if target.backend == "kuberay" else "TRAINBOT_PROMETHEUS_HOST_LABEL"
    return (
        f"no DCGM or Ray series match {matcher} in the {window.end - window.start:g} s from {moment}: "
        f"check that dcgm-exporter is scraped and that {setting} names the label it sets"
    )
