"""Alerts from Alertmanager, recorded in full, each in the thread of the job it is about.

Which thread: the labels named by `alert_thread_labels` (default namespace, rayjob, job). `namespace`,
when listed, qualifies the job; of the other labels, the first the alert carries (in the listed order)
names the job. So with the default an alert labelled {namespace: ml, rayjob: llm-ft, job: dcgm} is about
RayJob llm-ft in ml (Prometheus' scrape `job` label loses to `rayjob`), and its thread's key is
`ml/rayjob=llm-ft`. An alert with none of the job labels goes to one thread per alertname
(`alertname=GPUHot`). A thread's matchers pick exactly its alerts, as Alertmanager matches (a label
matched with "" must be absent), so a silence made from them silences that thread and nothing else.

Every alert in a notification is an event, recorded once: Alertmanager sends a group again every
repeat_interval and HA pairs send it twice, so the same fingerprint, startsAt and status are one event.
An alert's state follows its events by firing period (startsAt, as Prometheus sends it): a resolution
ends its period, a later startsAt starts a new one, and a late re-delivery of a period's firing after
its resolution is recorded but stale (it announces nothing). Events are posted later by the bot and
marked posted after Slack took them (at least once), like registry_events.py's notices.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy import (
    Connection,
    select,
    update,
)

from actions.alerts.notifications import FIRING, RESOLVED, Alert, Notification
from actions.errors import NotFound
from actions.state.database import Database
from actions.state.tables import MAX_KEY, alert_events, alert_states, alert_threads

NAMESPACE = "namespace"
# The default of the alert_thread_labels setting.
DEFAULT_THREAD_LABELS = ("namespace", "rayjob", "job")
# A round of the poster reads at most this many unposted events; the rest wait for the next round.
MAX_PENDING_EVENTS = 5000
# Bound on the ids in one UPDATE ... IN (...): old sqlite builds take 999 parameters at most.
IDS_PER_STATEMENT = 500


@dataclass(frozen=True)
class ThreadId:
    key: str
    job: str  # "" for the thread of alerts that name no job
    namespace: str
    # Label -> value; "" matches an absent label, as in Alertmanager's matchers.
    matchers: dict[str, str]


@dataclass(frozen=True)
class AlertThread(ThreadId):
    """A thread as recorded: which alerts it is for, and where they stand."""

    status: str
    alertnames: tuple[str, ...]
    firing: int  # alerts firing now
    alerts: int  # alerts seen (distinct fingerprints)
    events: int
    firing_since: datetime | None
    resolved_at: datetime | None
    first_seen: datetime
    last_seen: datetime
    revision: int
    announced_revision: int | None
    silence_id: str | None
    silenced_by: str | None
    silenced_until: datetime | None

    @property
    def title(self) -> str:
        """The job as people name it (`ml/llm-ft`), or the alertname of an unassigned thread."""
        if not self.job:
            return self.matchers.get("alertname") or "(no alertname)"
        return f"{self.namespace}/{self.job}" if self.namespace else self.job


@dataclass(frozen=True)
class AlertEvent:
    id: int
    thread_key: str
    fingerprint: str
    status: str
    alertname: str
    starts_at: datetime
    ends_at: datetime | None
    labels: dict[str, str]
    annotations: dict[str, str]
    received_at: datetime


@dataclass(frozen=True)
class ThreadNews:
    """A thread and its events not yet posted, oldest first."""

    thread: AlertThread
    events: tuple[AlertEvent, ...]


@dataclass(frozen=True)
class Receipt:
    recorded: int
    duplicates: int
    threads: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "duplicates": self.duplicates, "threads": list(self.threads)}


def thread_for(labels: Mapping[str, str], thread_labels: Sequence[str]) -> ThreadId:
    """The thread an alert with `labels` belongs to (see the module's docstring for the rule)."""
    job_labels = [label for label in thread_labels if label != NAMESPACE]
    qualified = NAMESPACE in thread_labels
    for position, label in enumerate(job_labels):
        if job := labels.get(label, ""):
            namespace = labels.get(NAMESPACE, "") if qualified else ""
            matchers = dict.fromkeys(job_labels[:position], "") | {label: job}
            if qualified:
                matchers[NAMESPACE] = namespace
            key = (f"{quote(namespace, safe='')}/" if namespace else "") + f"{label}={quote(job, safe='')}"
            return ThreadId(_bounded(key), job, namespace, matchers)
    alertname = labels.get("alertname", "")
    matchers = {"alertname": alertname} | dict.fromkeys(job_labels, "")
    return ThreadId(_bounded(f"alertname={quote(alertname, safe='')}"), "", "", matchers)


def _bounded(key: str) -> str:
    """The key, or for a very long label value its readable start and a digest of the whole."""
    if len(key) <= MAX_KEY:
        return key
    return f"{key[: MAX_KEY - 17]}#{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class AlertThreads(Database):
    """The alert events, each alert's state and the threads; every method is one transaction."""

    def __init__(self, url: str, thread_labels: Sequence[str] = DEFAULT_THREAD_LABELS) -> None:
        super().__init__(url)
        self.thread_labels = tuple(thread_labels)

    def record(self, notification: Notification, at: datetime) -> Receipt:
        recorded = duplicates = 0
        touched: dict[str, ThreadId] = {}
        new_events: dict[str, int] = {}
        # Oldest first, so an alert's later state wins within one notification; and one order of locks
        # for concurrent deliveries (on PostgreSQL).
        ordered = sorted(notification.alerts, key=lambda alert: (alert.fingerprint, alert.starts_at, alert.resolved))
        with self.engine.begin() as conn:
            # The first statement writes, so sqlite takes its write lock at once: concurrent deliveries are
            # serialised whole rather than reading a state another one is about to change.
            for alert in ordered:
                thread = thread_for(alert.labels, self.thread_labels)
                event_id = self._insert_event(conn, notification, alert, thread.key, at)
                if event_id is None:
                    duplicates += 1
                    continue
                recorded += 1
                if not self._advance(conn, alert, thread.key):
                    conn.execute(update(alert_events).where(alert_events.c.id == event_id).values(stale=True))
                touched[thread.key] = thread
                new_events[thread.key] = new_events.get(thread.key, 0) + 1
            for key in sorted(touched):
                self._refresh(conn, touched[key], new_events[key], at)
        return Receipt(recorded, duplicates, tuple(sorted(touched)))

    def pending(self, limit: int = MAX_PENDING_EVENTS) -> list[ThreadNews]:
        """Threads with events not yet posted, the one waiting longest first."""
        unposted = (alert_events.c.posted_at.is_(None), alert_events.c.stale.is_(False))
        events_query = select(alert_events).where(*unposted).order_by(alert_events.c.id).limit(limit)
        keys = select(alert_events.c.thread_key).where(*unposted).distinct()
        with self.engine.connect() as conn:
            events = [_event(row) for row in conn.execute(events_query).mappings()]
            threads = {
                row["key"]: _thread(row)
                for row in conn.execute(select(alert_threads).where(alert_threads.c.key.in_(keys))).mappings()
            }
        grouped: dict[str, list[AlertEvent]] = {}
        for event in events:
            grouped.setdefault(event.thread_key, []).append(event)
        return [ThreadNews(threads[key], tuple(found)) for key, found in grouped.items() if key in threads]

    def mark_posted(self, event_ids: Iterable[int], at: datetime) -> None:
        ids = list(event_ids)
        with self.engine.begin() as conn:
            for start in range(0, len(ids), IDS_PER_STATEMENT):
                chunk = ids[start : start + IDS_PER_STATEMENT]
                mark = update(alert_events).where(alert_events.c.id.in_(chunk), alert_events.c.posted_at.is_(None))
                conn.execute(mark.values(posted_at=at))

    def mark_announced(self, key: str, revision: int) -> None:
        """The thread's headline as of `revision` is what the channel shows."""
        with self.engine.begin() as conn:
            conn.execute(update(alert_threads).where(alert_threads.c.key == key).values(announced_revision=revision))

    def get(self, key: str) -> AlertThread:
        with self.engine.connect() as conn:
            row = conn.execute(select(alert_threads).where(alert_threads.c.key == key)).mappings().first()
        if row is None:
            raise NotFound(f"no alert thread {key!r}: its alerts were recorded in another state store")
        return _thread(row)

    def record_silence(self, key: str, silence_id: str, by: str, until: datetime) -> AlertThread:
        silenced = {"silence_id": silence_id, "silenced_by": by, "silenced_until": until}
        with self.engine.begin() as conn:
            conn.execute(update(alert_threads).where(alert_threads.c.key == key).values(silenced))
        return self.get(key)

    def _insert_event(
        self, conn: Connection, notification: Notification, alert: Alert, key: str, at: datetime
    ) -> int | None:
        """The new event's id; None when it was recorded before."""
        values = {
            "thread_key": key,
            "fingerprint": alert.fingerprint,
            "status": alert.status,
            "starts_at": alert.starts_at,
            "ends_at": alert.ends_at,
            "alertname": alert.name,
            "alert": alert.raw,
            "receiver": notification.receiver,
            "group_key": notification.group_key,
            "external_url": notification.external_url,
            "received_at": at,
            "stale": False,
        }
        inserted = self.insert_new(conn, alert_events, values, conflict=["fingerprint", "starts_at", "status"])
        return None if inserted is None else inserted.id

    def _advance(self, conn: Connection, alert: Alert, key: str) -> bool:
        """Move the alert's state to this event's; False when the event is older than the state."""
        values = {
            "thread_key": key,
            "alertname": alert.name,
            "status": alert.status,
            "starts_at": alert.starts_at,
            "ends_at": alert.ends_at,
        }
        if self.insert_new(conn, alert_states, {"fingerprint": alert.fingerprint, **values}) is not None:
            return True
        this = alert_states.c.fingerprint == alert.fingerprint
        stored = conn.execute(
            select(alert_states.c.status, alert_states.c.starts_at).where(this).with_for_update()
        ).one()
        # Within one firing period the resolution is the later state.
        if (alert.starts_at, alert.resolved) <= (stored.starts_at, stored.status == RESOLVED):
            return False
        conn.execute(update(alert_states).where(this).values(values))
        return True

    def _refresh(self, conn: Connection, thread: ThreadId, new_events: int, at: datetime) -> None:
        """The thread's status and counts from its alerts' states, after `new_events` more events."""
        identity = {"job": thread.job, "namespace": thread.namespace, "matchers": thread.matchers}
        first = self._insert(alert_threads).values(
            key=thread.key, **identity, status=RESOLVED, alertnames=[], firing=0, alerts=0, events=0,
            first_seen=at, last_seen=at, revision=0,
        )  # fmt: skip
        conn.execute(first.on_conflict_do_nothing())
        this = alert_threads.c.key == thread.key
        row = conn.execute(select(alert_threads).where(this).with_for_update()).mappings().one()
        states = conn.execute(select(alert_states).where(alert_states.c.thread_key == thread.key)).all()
        firing = [state.starts_at for state in states if state.status == FIRING]
        headline = {
            "status": FIRING if firing else RESOLVED,
            "alertnames": sorted({*row["alertnames"], *(state.alertname for state in states)}),
            "firing_since": _firing_since(row, firing),
            "resolved_at": None if firing else max((s.ends_at for s in states if s.ends_at), default=at),
        }
        changed = any(row[field] != value for field, value in headline.items())
        conn.execute(
            update(alert_threads)
            .where(this)
            .values(
                **identity,
                **headline,
                firing=len(firing),
                alerts=len(states),
                events=row["events"] + new_events,
                last_seen=at,
                revision=row["revision"] + (1 if changed else 0),
            )
        )


def _firing_since(row: Mapping[str, Any], firing: list[datetime]) -> datetime | None:
    """When the thread's current trouble began: kept while it goes on, reset when it starts again."""
    if not firing:
        return row["firing_since"]
    if row["status"] == FIRING and row["firing_since"] is not None:
        return min(row["firing_since"], *firing)
    return min(firing)


def _thread(row: Mapping[str, Any]) -> AlertThread:
    columns = {field.name: row[field.name] for field in fields(AlertThread)}
    return AlertThread(**{**columns, "matchers": dict(row["matchers"]), "alertnames": tuple(row["alertnames"])})


def _event(row: Mapping[str, Any]) -> AlertEvent:
    alert = row["alert"]
    return AlertEvent(
        id=row["id"],
        thread_key=row["thread_key"],
        fingerprint=row["fingerprint"],
        status=row["status"],
        alertname=row["alertname"],
        starts_at=row["starts_at"],
        ends_at=row["ends_at"],
        labels=dict(alert.get("labels") or {}),
        annotations=dict(alert.get("annotations") or {}),
        received_at=row["received_at"],
    )
