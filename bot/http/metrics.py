"""The bot's own Prometheus metrics, served at GET /metrics: requests, Slack ack latency, errors, and the
depth of the queue of work behind the acks. A registry of its own, so nothing else in the process
(Ray's or MLflow's clients) leaks into it."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Slack gives up after 3 s; the interesting part is well below 100 ms.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "trainbot_http_requests", "HTTP answers by route (server: before a route) and status", ["route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.ack_seconds = Histogram(
            "trainbot_slack_ack_seconds", "Time from a Slack request's arrival to trainbot's answer",
            buckets=ACK_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.errors = Counter(
            "trainbot_errors", "Failures nobody caused on purpose (each logged with an incident id)", ["where"],
            registry=self.registry,
        )  # fmt: skip
        self.queue_depth = Gauge(
            "trainbot_work_queue_depth", "Slack work acked and waiting for a worker thread", registry=self.registry
        )

    def watch_queue(self, waiting: Callable[[], int]) -> None:
        """Report the work `waiting` counts at each scrape."""
        self.queue_depth.set_function(waiting)

    def answered(self, route: str, status: str) -> None:
        self.requests.labels(route=route, status=status).inc()

    def incident(self, where: str) -> None:
        self.errors.labels(where=where).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
