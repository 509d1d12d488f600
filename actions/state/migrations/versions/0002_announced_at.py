"""With MLflow's webhooks: when a request's alias move was announced, and audit-trail lines with no request
or version (alias changes no request explains)."""

import sqlalchemy as sa
from alembic import op

revision = "0002_announced_at"
down_revision = "0001_baseline"


def upgrade() -> None:
    # A database from before versioning may have the column but lack a baseline table, and so be stamped
    # below this revision (legacy.py).
    present = {column["name"] for column in sa.inspect(op.get_bind()).get_columns("promotion_requests")}
    if "announced_at" not in present:
        op.add_column("promotion_requests", sa.Column("announced_at", sa.DateTime(timezone=True)))
    # sqlite alters a column's nullability only by copying the table (batch mode); PostgreSQL alters in place.
    with op.batch_alter_table("promotion_events") as batch:
        batch.alter_column("request_id", existing_type=sa.String(32), nullable=True)
        batch.alter_column("version", existing_type=sa.Integer(), nullable=True)
