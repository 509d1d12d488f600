"""Scaling studies: a template run at several sizes, the job at each size and the study's status."""

import sqlalchemy as sa
from alembic import op

revision = "0008_scale_studies"
down_revision = "0007_slack_seen_signatures"


def upgrade() -> None:
    op.create_table(
        "scale_studies",
        sa.Column("id", sa.String(63), primary_key=True),
        sa.Column("template", sa.String(63), nullable=False),
        sa.Column("requester", sa.Text(), nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("sizes", sa.JSON(), nullable=False),
        sa.Column("jobs", sa.JSON(), nullable=False),
        sa.Column("gpus_per_worker", sa.Integer(), nullable=False),
        sa.Column("batch_mode", sa.String(16), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("scale_studies_created_at", "scale_studies", ["created_at"])
