"""Scaling studies remember whether their points ran one after another or all at once (`--parallel`)."""

import sqlalchemy as sa
from alembic import op

revision = "0009_study_parallel"
down_revision = "0008_scale_studies"


def upgrade() -> None:
    # Every study before this revision ran its points one after another.
    op.add_column("scale_studies", sa.Column("parallel", sa.Boolean(), nullable=False, server_default=sa.false()))
