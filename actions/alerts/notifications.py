"""An Alertmanager webhook notification as the alert threads take it: its alerts, each firing or resolved.

The HTTP side (the body's bounds, its JSON, version 4's fields) is bot/web/alertmanager_webhook.py, which turns a
checked request into a Notification.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

STATUSES = ("firing", "resolved")
FIRING, RESOLVED = STATUSES


@dataclass(frozen=True)
class Alert:
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None
    generator_url: str
    fingerprint: str
    # The alert exactly as it was sent, kept in the state store.
    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def resolved(self) -> bool:
        return self.status == RESOLVED


@dataclass(frozen=True)
class Notification:
    status: str
    receiver: str
    group_key: str
    group_labels: dict[str, str]
    common_labels: dict[str, str]
    external_url: str
    alerts: tuple[Alert, ...]
