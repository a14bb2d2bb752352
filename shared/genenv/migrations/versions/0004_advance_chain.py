"""run.advance_token and run.advance_due_at: the orchestrator's one live advance chain per run, and when its next
advance is due (the watchdog re-enqueues a running run whose advance is overdue, e.g. after a broker restart).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 16:10:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Two nullable columns: existing runs have no chain yet (their next advance message carries no token)."""
    with op.batch_alter_table('run') as batch:
        batch.add_column(sa.Column('advance_token', sa.String(length=32), nullable=True))
        batch.add_column(sa.Column('advance_due_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop both columns."""
    with op.batch_alter_table('run') as batch:
        batch.drop_column('advance_due_at')
        batch.drop_column('advance_token')
