"""Which revision a database made before trainbot versioned its schema is at.

Those databases were made by SQLAlchemy's create_all, one Database at a time (the CLI's job commands
make only the jobs tables, say), which creates missing tables and never alters one. So any subset of
the tables below may be there, each as the trainbot of its day defined it; the one change made in place
since the baseline is 0002 (promotion_requests.announced_at; promotion_events' request and version made
nullable), known by its column. The revision stamped is the newest one that is there in full with all
before it; the revisions after it create only what is missing. Revisions added after versioning began
never meet such a database and need no entry here.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Connection, inspect

# Each revision made before versioning began: the tables it created, and the columns it added to older ones.
LEGACY_REVISIONS: tuple[tuple[str, frozenset[str], Mapping[str, str]], ...] = (
    (
        "0001_baseline",
        frozenset({"jobs", "job_events", "cursors", "promotion_requests", "promotion_approvals", "promotion_events"}),
        {},
    ),
    ("0002_announced_at", frozenset(), {"promotion_requests": "announced_at"}),
    ("0003_mlflow_webhooks", frozenset({"mlflow_deliveries", "promotion_notices"}), {}),
    ("0004_slack_posts", frozenset({"slack_posts"}), {}),
    ("0005_slack_shown", frozenset({"slack_shown"}), {}),
    ("0006_alert_threads", frozenset({"alert_events", "alert_states", "alert_threads"}), {}),
)


def shown_revision(connection: Connection) -> str | None:
    """The newest revision whose tables and columns are there, with every earlier one's; None: not even the baseline."""
    inspector = inspect(connection)
    present = set(inspector.get_table_names())
    shown = None
    for revision, tables, added_columns in LEGACY_REVISIONS:
        if not tables <= present:
            return shown
        for table, column in added_columns.items():
            if column not in {found["name"] for found in inspector.get_columns(table)}:
                return shown
        shown = revision
    return shown
