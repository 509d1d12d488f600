"""Slack request signatures already taken, so a replay within the 5-minute window is refused."""

import sqlalchemy as sa
from alembic import op

revision = "0007_slack_seen_signatures"
down_revision = "0006_alert_threads"


def upgrade() -> None:
    op.create_table(
        "slack_seen_signatures",
        sa.Column("signature", sa.String(64), primary_key=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("slack_seen_signatures_expires_at", "slack_seen_signatures", ["expires_at"])
