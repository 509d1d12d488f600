"""The messages of an alert thread: its parent (where the job's alerts stand), a reply with what is new,
the digest that stands in for threads during a storm, and the note that someone silenced it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from actions.alerts.notifications import FIRING
from actions.alerts.threads import NAMESPACE
from bot.render.blocks import Message, render

if TYPE_CHECKING:
    from actions.alerts.silences import Silenced
    from actions.alerts.threads import AlertEvent, AlertThread, ThreadNews

# Lines a reply or a digest lists; the rest are counted ("… and 12 more").
MAX_LINES = 20
# Labels shown beside an event (those that tell its alerts apart: pod, gpu, instance...).
MAX_LABELS = 4
HIDDEN_LABELS = frozenset({"alertname"})


@dataclass(frozen=True)
class EventLine:
    firing: bool
    alertname: str
    what: str
    summary: str
    labels: list[str]


def when(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at else "at an unknown time"


def thread_parent(thread: AlertThread, silenceable: bool, now: datetime) -> Message:
    """The thread's first message; `silenceable` offers "Silence 2h" while it fires."""
    firing = thread.status == FIRING
    silenced = thread.silenced_until if thread.silenced_until and thread.silenced_until > now else None
    text = f"{'Firing' if firing else 'Resolved'}: {thread.title}: {', '.join(thread.alertnames)}"
    return render(
        "alert_thread",
        text,
        thread=thread,
        since=when(thread.firing_since),
        resolved=when(thread.resolved_at),
        # A job thread matches one job label with a value; an unassigned one requires every job label absent.
        job_label=next((label for label, value in thread.matchers.items() if value and label != NAMESPACE), ""),
        job_labels=[label for label in thread.matchers if label != "alertname"],
        silenced_until=when(silenced) if silenced else "",
        silence_button=silenceable and firing,
    )


def thread_news(thread: AlertThread, events: Sequence[AlertEvent]) -> Message:
    """One reply for all of a thread's new events."""
    in_order = sorted(events, key=lambda event: (_happened(event), event.alertname))
    lines = [_line(event, thread.matchers) for event in in_order[:MAX_LINES]]
    text = f"{thread.title}: {len(events)} new, {thread.firing} of {thread.alerts} alerts firing"
    return render("alert_news", text, thread=thread, events=events, lines=lines, more=len(events) - len(lines))


def storm_digest(news: Sequence[ThreadNews]) -> Message:
    """One message for the threads that could not open this round: their new alerts counted by job and name."""
    jobs = []
    for item in news:
        names = Counter(event.alertname for event in item.events)
        resolved = sum(event.status != FIRING for event in item.events)
        jobs.append(
            {
                "title": item.thread.title,
                "names": [f"{n} ({c})" for n, c in sorted(names.items())],
                "resolved": resolved,
            }
        )
    events = sum(len(item.events) for item in news)
    text = f"{events} new alerts for {len(news)} more jobs, too many for a thread each right now"
    return render("alert_digest", text, jobs=jobs, events=events, shown=MAX_LINES)


def silenced_note(silenced: Silenced) -> Message:
    matchers = ", ".join(f'{name}="{value}"' for name, value in silenced.thread.matchers.items())
    text = (
        f"{silenced.by} silenced these alerts until {when(silenced.until)} "
        f"(Alertmanager silence {silenced.silence_id}: {matchers})"
    )
    return render("alert_silenced", text, silenced=silenced, until=when(silenced.until), matchers=matchers)


def _line(event: AlertEvent, matchers: dict[str, str]) -> EventLine:
    firing = event.status == FIRING
    what = f"firing since {when(event.starts_at)}" if firing else f"resolved {when(event.ends_at)}"
    summary = event.annotations.get("summary") or event.annotations.get("description") or ""
    shown = sorted(label for label in event.labels if label not in HIDDEN_LABELS and label not in matchers)
    labels = [f"{label}={event.labels[label]}" for label in shown[:MAX_LABELS]]
    return EventLine(firing, event.alertname, what, summary, labels)


def _happened(event: AlertEvent) -> datetime:
    return event.ends_at if event.status != FIRING and event.ends_at else event.starts_at
