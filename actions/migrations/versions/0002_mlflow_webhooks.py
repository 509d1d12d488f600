"""MLflow's webhooks: when a request's alias move was announced, audit-trail lines with no request or
version (alias changes no request explains), the deliveries handled and the notices they raised."""

import sqlalchemy as sa
from alembic import op

revision = "0002_mlflow_webhooks"
down_revision = "0001_baseline"


def upgrade() -> None:
    # A database from before versioning may hold promotion_requests as made after this change (its
    # version is then stamped below this one when another of its tables is missing; see legacy.py).
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("promotion_requests")}
    if "announced_at" not in present:
        op.add_column("promotion_requests", sa.Column("announced_at", sa.DateTime(timezone=True)))
    # sqlite alters a column's nullability only by copying the table (batch mode); PostgreSQL alters in place.
    with op.batch_alter_table("promotion_events") as batch:
        batch.alter_column("request_id", existing_type=sa.String(32), nullable=True)
        batch.alter_column("version", existing_type=sa.Integer(), nullable=True)
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
