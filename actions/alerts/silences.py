"""Silencing an alert thread through Alertmanager's API (POST /api/v2/silences).

The silence's matchers are the thread's own (equality, "" for a label that must be absent), so it
silences exactly the alerts that would come to that thread. The silence is recorded on the thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

import requests

from actions.alerts.threads import AlertThread, AlertThreads
from actions.errors import BadRequest, Unavailable

SILENCES_PATH = "/api/v2/silences"
TIMEOUT_S = 10.0
URL_SETTING = "TRAINBOT_ALERTMANAGER_URL"


@dataclass(frozen=True)
class Silenced:
    thread: AlertThread
    silence_id: str
    by: str
    until: datetime


def silence_thread(
    threads: AlertThreads, alertmanager_url: str, key: str, by: str, at: datetime, duration: timedelta
) -> Silenced:
    """Silence the alerts of thread `key` from `at` for `duration`, on behalf of `by`."""
    if not alertmanager_url:
        raise BadRequest(f"trainbot knows no Alertmanager to silence in: set {URL_SETTING}")
    thread = threads.get(key)
    until = at + duration
    comment = f"Silenced from Slack by {by} for the alert thread of {thread.title} (trainbot)"
    silence_id = create_silence(alertmanager_url, thread.matchers, by, comment, at, until)
    return Silenced(threads.record_silence(key, silence_id, by, until), silence_id, by, until)


def create_silence(
    url: str, matchers: dict[str, str], created_by: str, comment: str, starts_at: datetime, ends_at: datetime
) -> str:
    """The id of a new silence with these equality matchers; Unavailable when Alertmanager is down or refuses."""
    silence = {
        "matchers": [
            {"name": name, "value": value, "isRegex": False, "isEqual": True} for name, value in matchers.items()
        ],
        "startsAt": starts_at.isoformat(),
        "endsAt": ends_at.isoformat(),
        "createdBy": created_by,
        "comment": comment,
    }
    endpoint = url.rstrip("/") + SILENCES_PATH
    try:
        response = requests.post(endpoint, json=silence, timeout=TIMEOUT_S)
    except requests.RequestException as error:
        raise Unavailable(
            f"Alertmanager at {url} did not answer ({type(error).__name__}), so nothing was silenced; "
            f"check that it is up and that {URL_SETTING} points at it"
        ) from None
    if response.status_code != requests.codes.ok:
        raise Unavailable(
            f"Alertmanager at {url} refused the silence (HTTP {response.status_code}: {_reason(response)}), "
            "so nothing was silenced"
        )
    try:
        return str(response.json()["silenceID"])
    except (ValueError, KeyError, TypeError):
        raise Unavailable(
            f"{endpoint} answered without a silenceID; is {URL_SETTING} Alertmanager's own address?"
        ) from None


def _reason(response: requests.Response) -> str:
    """Alertmanager's error text (it answers a JSON string), shortened."""
    try:
        text = response.json()
    except ValueError:
        text = response.text
    return (text if isinstance(text, str) else json.dumps(text))[:300] or response.reason
