"""Alertmanager's alerts: every event as it came, each alert's latest state, and one thread per job."""

import sqlalchemy as sa
from alembic import op

revision = "0006_alert_threads"
down_revision = "0005_slack_shown"


def upgrade() -> None:
    op.create_table(
        "alert_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("thread_key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True)),
        sa.Column("alertname", sa.Text(), nullable=False),
        sa.Column("alert", sa.JSON(), nullable=False),
        sa.Column("receiver", sa.Text(), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("external_url", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stale", sa.Boolean(), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("fingerprint", "starts_at", "status", name="alert_events_once"),
        if_not_exists=True,
    )
    op.create_index("ix_alert_events_posted_at", "alert_events", ["posted_at"], if_not_exists=True)
    op.create_index("alert_events_thread_key_id", "alert_events", ["thread_key", "id"], if_not_exists=True)
    op.create_table(
        "alert_states",
        sa.Column("fingerprint", sa.String(64), primary_key=True),
        sa.Column("thread_key", sa.String(255), nullable=False),
        sa.Column("alertname", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True)),
        if_not_exists=True,
    )
    op.create_index("ix_alert_states_thread_key", "alert_states", ["thread_key"], if_not_exists=True)
    op.create_table(
        "alert_threads",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("job", sa.Text(), nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("matchers", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("alertnames", sa.JSON(), nullable=False),
        sa.Column("firing", sa.Integer(), nullable=False),
        sa.Column("alerts", sa.Integer(), nullable=False),
        sa.Column("events", sa.Integer(), nullable=False),
        sa.Column("firing_since", sa.DateTime(timezone=True)),
        sa.Column("resolved_at", sa.DateTime(timezone=True)),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("announced_revision", sa.Integer()),
        sa.Column("silence_id", sa.Text()),
        sa.Column("silenced_by", sa.Text()),
        sa.Column("silenced_until", sa.DateTime(timezone=True)),
        if_not_exists=True,
    )
