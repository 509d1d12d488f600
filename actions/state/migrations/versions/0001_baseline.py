"""Baseline: the state store as it stood before MLflow's webhooks (the jobs, their history, the watcher's
cursors, and promotion requests, approvals and audit trail).

Databases made before trainbot versioned its schema were made one Database at a time, so any of these
tables may already be there: every table and index is created only if missing (see legacy.py).
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None


def _status_columns() -> list[sa.Column]:
    """A job's status, in the jobs row (the latest) and in each job_events row."""
    return [
        sa.Column("state", sa.String(16), nullable=False),
        *(
            sa.Column(field, sa.Text(), nullable=False)
            for field in ("message", "reason", "deployment_status", "dashboard_url", "cluster_name", "submission_id")
        ),
        sa.Column("start_time", sa.DateTime(timezone=True)),
        sa.Column("end_time", sa.DateTime(timezone=True)),
    ]


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("template", sa.String(63), nullable=False),
        sa.Column("requester", sa.Text(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("workers", sa.Integer(), nullable=False),
        sa.Column("gpus_per_worker", sa.Integer(), nullable=False),
        sa.Column("entrypoint", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        *_status_columns(),
        if_not_exists=True,
    )
    op.create_index("jobs_created_at", "jobs", ["created_at"], if_not_exists=True)
    op.create_index("jobs_state", "jobs", ["state"], if_not_exists=True)
    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_name", sa.String(63), sa.ForeignKey("jobs.name", ondelete="CASCADE"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        *_status_columns(),
        if_not_exists=True,
    )
    op.create_index("job_events_job_name_id", "job_events", ["job_name", "id"], if_not_exists=True)
    op.create_table(
        "cursors",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "promotion_requests",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(256), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("requester", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("approvals_needed", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("previous_version", sa.Integer()),
        sa.Column("move_started_at", sa.DateTime(timezone=True)),
        sa.Column("open_key", sa.String(600), unique=True),
        sa.Column("lease_until", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        if_not_exists=True,
    )
    op.create_index("ix_promotion_requests_model", "promotion_requests", ["model"], if_not_exists=True)
    op.create_index("ix_promotion_requests_state", "promotion_requests", ["state"], if_not_exists=True)
    op.create_table(
        "promotion_approvals",
        sa.Column("request_id", sa.String(32), sa.ForeignKey("promotion_requests.id"), primary_key=True),
        sa.Column("approver", sa.String(128), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "promotion_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("request_id", sa.String(32), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("target", sa.String(256), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.Text()),
        if_not_exists=True,
    )
    op.create_index("ix_promotion_events_request_id", "promotion_events", ["request_id"], if_not_exists=True)
    op.create_index("ix_promotion_events_model", "promotion_events", ["model"], if_not_exists=True)
