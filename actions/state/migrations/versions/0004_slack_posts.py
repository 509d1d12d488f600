"""Where the bot posted about something (a promotion request, a job, an alert group)."""

import sqlalchemy as sa
from alembic import op

revision = "0004_slack_posts"
down_revision = "0003_mlflow_webhooks"


def upgrade() -> None:
    op.create_table(
        "slack_posts",
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=False),
        if_not_exists=True,
    )
