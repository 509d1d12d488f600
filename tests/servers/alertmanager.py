"""Alertmanager for the tests: webhook bodies shaped exactly as Alertmanager 0.25 sends them, and the real
`prometheus-alertmanager` (Debian's package) on loopback ports, routing to a webhook URL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from tests.servers.processes import free_port, serving

ALERTMANAGER = "prometheus-alertmanager"
INSTALL_HINT = f"{ALERTMANAGER} not found: apt-get install -y prometheus-alertmanager (make prometheus does)"
# Go's zero time: the endsAt Alertmanager sends for an alert still firing.
NOT_ENDED = "0001-01-01T00:00:00Z"
EXTERNAL_URL = "http://alertmanager.monitoring:9093"
FNV_OFFSET, FNV_PRIME, SEPARATOR = 14695981039346656037, 1099511628211, b"\xff"


def missing_binary() -> str:
    """Why the real Alertmanager cannot run here ("" when it can)."""
    return "" if shutil.which(ALERTMANAGER) else INSTALL_HINT


def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set: FNV-1a 64 over the sorted names and values."""
    digest = FNV_OFFSET
    for name in sorted(labels):
        for part in (name.encode(), SEPARATOR, labels[name].encode(), SEPARATOR):
            for byte in part:
                digest = ((digest ^ byte) * FNV_PRIME) % 2**64
    return f"{digest:016x}"


def rfc3339(at: datetime) -> str:
    """A time as Alertmanager writes it: UTC, nanoseconds, Z."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


def alert(
    labels: Mapping[str, str],
    starts_at: datetime,
    ends_at: datetime | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One alert of a notification: resolved when it has an `ends_at`."""
    return {
        "status": "resolved" if ends_at else "firing",
        "labels": dict(labels),
        "annotations": dict(annotations or {}),
        "startsAt": rfc3339(starts_at),
        "endsAt": rfc3339(ends_at) if ends_at else NOT_ENDED,
        "generatorURL": "http://prometheus.monitoring:9090/graph?g0.expr=DCGM_FI_DEV_GPU_TEMP+%3E+85",
        "fingerprint": fingerprint(labels),
    }


def notification(alerts: Sequence[dict[str, Any]], group_by: Sequence[str] = ("namespace", "rayjob", "job")) -> dict:
    """A webhook body (version 4) for a group of alerts, its common labels and group key as Alertmanager
    computes them."""
    common = dict(alerts[0]["labels"])
    for each in alerts[1:]:
        common = {name: value for name, value in common.items() if each["labels"].get(name) == value}
    group_labels = {name: alerts[0]["labels"][name] for name in group_by if name in alerts[0]["labels"]}
    key = ", ".join(f'{name}="{value}"' for name, value in sorted(group_labels.items()))
    return {
        "receiver": "trainbot",
        "status": "firing" if any(each["status"] == "firing" for each in alerts) else "resolved",
        "alerts": list(alerts),
        "groupLabels": group_labels,
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": EXTERNAL_URL,
        "version": "4",
        "groupKey": "{}:{" + key + "}",
        "truncatedAlerts": 0,
    }


@contextmanager
def running_alertmanager(folder: Path, webhook_url: str, repeat_interval: str = "1h") -> Iterator[str]:
    """A real Alertmanager on a loopback port that sends every group to `webhook_url` a second after it
    changes; yields its base URL once /-/ready answers."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "alertmanager.yml"
    config.write_text(
        "route:\n"
        "  receiver: trainbot\n"
        "  group_by: [namespace, rayjob, job]\n"
        "  group_wait: 1s\n"
        "  group_interval: 1s\n"
        f"  repeat_interval: {repeat_interval}\n"
        "receivers:\n"
        "  - name: trainbot\n"
        "    webhook_configs:\n"
        f"      - url: {webhook_url}\n"
        "        send_resolved: true\n"
    )
    port = free_port()
    command = [
        ALERTMANAGER,
        f"--config.file={config}",
        f"--storage.path={folder / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        # No gossip cluster: it would listen on 0.0.0.0:9094.
        "--cluster.listen-address=",
    ]
    url = f"http://127.0.0.1:{port}"
    with serving(command, folder / "alertmanager.log", f"{url}/-/ready"):
        yield url


def post_alerts(alertmanager_url: str, alerts: Sequence[dict[str, Any]]) -> None:
    """Send alerts to Alertmanager's API the way Prometheus does (labels, annotations, startsAt, endsAt)."""
    sent = [
        {key: each[key] for key in ("labels", "annotations", "startsAt", "generatorURL")}
        | ({"endsAt": each["endsAt"]} if each["status"] == "resolved" else {})
        for each in alerts
    ]
    answer = requests.post(f"{alertmanager_url}/api/v2/alerts", json=sent, timeout=10)
    assert answer.status_code == 200, answer.text
