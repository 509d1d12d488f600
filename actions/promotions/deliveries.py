"""An MLflow webhook delivery (MLflow >= 3.3) as promotions take it, and the events trainbot subscribes to.

The HTTP side (the signature over the raw headers and body, the replay window, the JSON) is bot/web/mlflow_webhook.py,
which turns a checked request into a Delivery.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

EVENTS = ("model_version.created", "model_version_alias.created", "model_version_alias.deleted")


@dataclass(frozen=True)
class Delivery:
    id: str
    event: str  # "<entity>.<action>", as MLflow names its webhook events
    data: dict[str, Any]
    sent_at: datetime
