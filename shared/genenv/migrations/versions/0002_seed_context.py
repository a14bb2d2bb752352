"""seed.context: the agent's success statistics the simulator's prompt carried for this seed in this epoch.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 17:30:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision: str = '0002'
down_revision: Union[str, Sequence[str], None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Add the nullable column (existing seeds had no statistics in their prompt)."""
    with op.batch_alter_table('seed') as batch:
        batch.add_column(sa.Column('context', JSON, nullable=True))


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table('seed') as batch:
        batch.drop_column('context')
