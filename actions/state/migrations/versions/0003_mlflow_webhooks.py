"""MLflow's webhooks: the deliveries handled, and the notices they raised for the bot to post."""

import sqlalchemy as sa
from alembic import op

revision = "0003_mlflow_webhooks"
down_revision = "0002_announced_at"


def upgrade() -> None:
    op.create_table(
        "mlflow_deliveries",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "promotion_notices",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("version", sa.Integer()),
        sa.Column("alias", sa.String(256)),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True)),
        if_not_exists=True,
    )
    op.create_index("ix_promotion_notices_posted_at", "promotion_notices", ["posted_at"], if_not_exists=True)
