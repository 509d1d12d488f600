"""Every table of the state store, in one schema: what each subject keeps (jobs, promotions, MLflow's
deliveries, alert threads, Slack posts and signatures). Each change to it comes with a revision in
actions/state/migrations/versions/ (tests/unit/actions/test_migrations.py compares the two)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

from actions.state.database import UTCDateTime

metadata = MetaData()

# --- The jobs trainbot launched, their state history, and the watcher's cursors (actions/jobs/records.py).

TEXT_FIELDS = ("message", "reason", "deployment_status", "dashboard_url", "cluster_name", "submission_id")

TIME_FIELDS = ("start_time", "end_time")


def _status_columns() -> list[Column[Any]]:
    """A JobStatus but its name: the latest one in the jobs row, each observed one in job_events."""
    return [
        Column("state", String(16), nullable=False),
        *(Column(field, Text, nullable=False) for field in TEXT_FIELDS),
        *(Column(field, UTCDateTime) for field in TIME_FIELDS),
    ]


jobs = Table(
    "jobs",
    metadata,
    # Our job names are DNS-1035 labels of at most 47 characters (actions.jobs.job.MAX_JOB_NAME).
    Column("name", String(63), primary_key=True),
    Column("backend", String(16), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("template", String(63), nullable=False),
    Column("requester", Text, nullable=False),
    Column("params", JSON, nullable=False),
    Column("workers", Integer, nullable=False),
    Column("gpus_per_worker", Integer, nullable=False),
    Column("entrypoint", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    *_status_columns(),
    Index("jobs_created_at", "created_at"),
    Index("jobs_state", "state"),
)

job_events = Table(
    "job_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_name", String(63), ForeignKey("jobs.name", ondelete="CASCADE"), nullable=False),
    Column("at", UTCDateTime, nullable=False),
    *_status_columns(),
    Index("job_events_job_name_id", "job_name", "id"),
)

cursors = Table(
    "cursors",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("value", Text, nullable=False),
)

# --- Promotion requests, their approvals and their audit trail (actions/promotions/store.py).

promotion_requests = Table(
    "promotion_requests",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("model", String(256), nullable=False, index=True),
    Column("version", Integer, nullable=False),
    Column("target", String(256), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("requester", String(128), nullable=False),
    Column("state", String(16), nullable=False, index=True),
    Column("approvals_needed", Integer, nullable=False),
    Column("reason", Text),
    # The version the alias named before the move, read once before the first attempt to move it.
    Column("previous_version", Integer),
    Column("move_started_at", UTCDateTime()),
    # When an MLflow webhook announced this request's alias move (registry_events.py).
    Column("announced_at", UTCDateTime()),
    # "model\ntarget" while the request is open, else NULL: one open request per model and target.
    Column("open_key", String(600), unique=True),
    Column("lease_until", UTCDateTime()),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

promotion_approvals = Table(
    "promotion_approvals",
    metadata,
    Column("request_id", String(32), ForeignKey("promotion_requests.id"), primary_key=True),
    Column("approver", String(128), primary_key=True),
    Column("at", UTCDateTime(), nullable=False),
)

promotion_events = Table(
    "promotion_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # No request and no version: an alias change no request explains (see registry_events.py).
    Column("request_id", String(32), index=True),
    Column("model", String(256), nullable=False, index=True),
    Column("target", String(256), nullable=False),
    Column("version", Integer),
    Column("event", String(32), nullable=False),
    Column("actor", String(128), nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("detail", Text),
)

# --- MLflow webhook deliveries taken, and the notices they raised (actions/promotions/registry_events.py).

mlflow_deliveries = Table(
    "mlflow_deliveries",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("event", String(64), nullable=False),
    Column("received_at", UTCDateTime(), nullable=False),
)

promotion_notices = Table(
    "promotion_notices",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("model", String(256), nullable=False),
    Column("version", Integer),
    Column("alias", String(256)),
    Column("text", Text, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    # Set by the bot once it has posted the notice.
    Column("posted_at", UTCDateTime(), index=True),
)

# --- Slack request signatures already taken (actions/state/seen_signatures.py).

slack_seen_signatures = Table(
    "slack_seen_signatures",
    metadata,
    # The hex HMAC-SHA256 of Slack's v0 signature.
    Column("signature", String(64), primary_key=True),
    # After this the request's timestamp is out of its window, so the signature cannot be accepted again anyway.
    Column("expires_at", UTCDateTime(), nullable=False),
    Index("slack_seen_signatures_expires_at", "expires_at"),
)

# --- Where the bot posted about something, and what it last showed there (actions/state/posts.py).

slack_posts = Table(
    "slack_posts",
    metadata,
    Column("key", String(300), primary_key=True),
    Column("channel", String(64), nullable=False),
    Column("ts", String(32), nullable=False),
    Column("posted_at", UTCDateTime(), nullable=False),
)

# What a post last showed (a job's state, say), so each change is told once however many watchers see it.
slack_shown = Table(
    "slack_shown",
    metadata,
    Column("key", String(300), primary_key=True),
    Column("state", String(64), nullable=False),
)

# --- Alertmanager's alerts, their latest states and the thread of each job (actions/alerts/threads.py).

MAX_KEY = 255

alert_events = Table(
    "alert_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("thread_key", String(MAX_KEY), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("starts_at", UTCDateTime(), nullable=False),
    Column("ends_at", UTCDateTime()),
    Column("alertname", Text, nullable=False),
    # The alert object exactly as Alertmanager sent it, and where it came from.
    Column("alert", JSON, nullable=False),
    Column("receiver", Text, nullable=False),
    Column("group_key", Text, nullable=False),
    Column("external_url", Text, nullable=False),
    Column("received_at", UTCDateTime(), nullable=False),
    Column("stale", Boolean, nullable=False),
    # Set by the bot once Slack has taken a message that tells of the event.
    Column("posted_at", UTCDateTime(), index=True),
    UniqueConstraint("fingerprint", "starts_at", "status", name="alert_events_once"),
    Index("alert_events_thread_key_id", "thread_key", "id"),
)

# Each alert's latest state, by fingerprint (Alertmanager's hash of its labels).
alert_states = Table(
    "alert_states",
    metadata,
    Column("fingerprint", String(64), primary_key=True),
    Column("thread_key", String(MAX_KEY), nullable=False, index=True),
    Column("alertname", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("starts_at", UTCDateTime(), nullable=False),
    Column("ends_at", UTCDateTime()),
)

alert_threads = Table(
    "alert_threads",
    metadata,
    Column("key", String(MAX_KEY), primary_key=True),
    Column("job", Text, nullable=False),
    Column("namespace", Text, nullable=False),
    Column("matchers", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("alertnames", JSON, nullable=False),
    Column("firing", Integer, nullable=False),
    Column("alerts", Integer, nullable=False),
    Column("events", Integer, nullable=False),
    Column("firing_since", UTCDateTime()),
    Column("resolved_at", UTCDateTime()),
    Column("first_seen", UTCDateTime(), nullable=False),
    Column("last_seen", UTCDateTime(), nullable=False),
    # Bumped when the thread's headline (status, alert names, since, resolved at) changes; the poster
    # notes the revision it announced, so the headline is edited only when there is something new in it.
    Column("revision", Integer, nullable=False),
    Column("announced_revision", Integer),
    Column("silence_id", Text),
    Column("silenced_by", Text),
    Column("silenced_until", UTCDateTime()),
)

# --- Scaling studies: one template run at several sizes, one job a size (actions/jobs/studies.py).

scale_studies = Table(
    "scale_studies",
    metadata,
    Column("id", String(63), primary_key=True),
    Column("template", String(63), nullable=False),
    Column("requester", Text, nullable=False),
    Column("backend", String(16), nullable=False),
    Column("params", JSON, nullable=False),
    # The workers at each size, smallest first, and the job launched at each size so far (same order).
    Column("sizes", JSON, nullable=False),
    Column("jobs", JSON, nullable=False),
    Column("gpus_per_worker", Integer, nullable=False),
    Column("batch_mode", String(16), nullable=False),
    Column("steps", Integer, nullable=False),
    # Every point launched at once (`--parallel`): they competed for the machine.
    Column("parallel", Boolean, nullable=False, server_default=false()),
    Column("status", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Index("scale_studies_created_at", "created_at"),
)
