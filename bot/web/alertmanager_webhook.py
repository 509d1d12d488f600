"""POST /alerts/alertmanager: an Alertmanager webhook notification (version 4, as Alertmanager 0.x sends it), read
and checked into the Notification that the alert threads take (actions/alerts/notifications.py).

Alertmanager posts one JSON object per group of alerts:
{"version": "4", "status": "firing|resolved", "receiver", "groupKey", "groupLabels", "commonLabels",
 "commonAnnotations", "externalURL", "truncatedAlerts", "alerts": [{"status", "labels", "annotations",
 "startsAt", "endsAt", "generatorURL", "fingerprint"}]}. A firing alert's endsAt is Go's zero time
(0001-01-01T00:00:00Z); times are RFC 3339 with nanoseconds, read here to microseconds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from actions.alerts.notifications import STATUSES, Alert, Notification
from actions.errors import BadRequest
from bot.http.bounded_json import NotJSON, read_json
from bot.http.server import read_body

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

VERSION = "4"
# A storm comes as large groups: 5,000 alerts with their labels and annotations fit with room to spare.
MAX_BODY_BYTES = 8 * 1024 * 1024
# Go's zero time.Time: Alertmanager's endsAt of an alert that has not ended.
UNSET_YEAR = 1
HINT = "is this Alertmanager's webhook (version 4)?"


def request_notification(environ: WSGIEnvironment) -> Notification:
    """The notification a request carries: BodyRefused or BadRequest otherwise."""
    return _notification(read_body(environ, MAX_BODY_BYTES))


def _notification(body: bytes) -> Notification:
    """The notification in `body`; BadRequest saying what is wrong where, for anything else."""
    try:
        document = read_json(body, MAX_BODY_BYTES)
    except NotJSON as error:
        raise BadRequest(f"the body is not JSON ({error}); {HINT}") from None
    if not isinstance(document, dict):
        raise BadRequest(f"the body is not a JSON object; {HINT}")
    if document.get("version") != VERSION:
        raise BadRequest(f"version {document.get('version')!r} is not {VERSION!r}; {HINT}")
    alerts = document.get("alerts")
    if not isinstance(alerts, list) or not alerts:
        raise BadRequest(f"`alerts` is missing or empty; {HINT}")
    return Notification(
        status=_status(document, "status"),
        receiver=_string(document, "receiver"),
        group_key=_string(document, "groupKey"),
        group_labels=_labels(document, "groupLabels"),
        common_labels=_labels(document, "commonLabels"),
        external_url=_string(document, "externalURL"),
        alerts=tuple(_alert(alert, f"alerts[{index}]") for index, alert in enumerate(alerts)),
    )


def _alert(alert: object, where: str) -> Alert:
    if not isinstance(alert, dict):
        raise BadRequest(f"{where} is not an object")
    fingerprint = _string(alert, "fingerprint", where)
    if not fingerprint or len(fingerprint) > 64:
        raise BadRequest(f"{where}.fingerprint {fingerprint!r} is not an Alertmanager fingerprint")
    ends_at = _time(alert, "endsAt", where)
    return Alert(
        status=_status(alert, "status", where),
        labels=_labels(alert, "labels", where),
        annotations=_labels(alert, "annotations", where),
        starts_at=_time(alert, "startsAt", where),
        ends_at=None if ends_at.year == UNSET_YEAR else ends_at,
        generator_url=_string(alert, "generatorURL", where),
        fingerprint=fingerprint,
        raw=alert,
    )


def _status(document: dict[str, Any], key: str, where: str = "") -> str:
    value = document.get(key)
    if value not in STATUSES:
        raise BadRequest(f"{_place(where, key)} {value!r} is neither firing nor resolved")
    return value


def _string(document: dict[str, Any], key: str, where: str = "") -> str:
    value = document.get(key, "")
    if not isinstance(value, str):
        raise BadRequest(f"{_place(where, key)} is not a string")
    return value


def _labels(document: dict[str, Any], key: str, where: str = "") -> dict[str, str]:
    value = document.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in (*value, *value.values())):
        raise BadRequest(f"{_place(where, key)} is not an object of strings")
    return value


def _time(document: dict[str, Any], key: str, where: str) -> datetime:
    value = document.get(key)
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        pass
    raise BadRequest(f"{_place(where, key)} {value!r} is not an RFC 3339 time")


def _place(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
