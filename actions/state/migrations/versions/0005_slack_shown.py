"""What a post last showed, so each change is told once however many watchers see it."""

import sqlalchemy as sa
from alembic import op

revision = "0005_slack_shown"
down_revision = "0004_slack_posts"


def upgrade() -> None:
    op.create_table(
        "slack_shown",
        sa.Column("key", sa.String(300), primary_key=True),
        sa.Column("state", sa.String(64), nullable=False),
        if_not_exists=True,
    )
