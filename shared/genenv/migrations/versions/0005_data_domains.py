"""data_domain: data-defined domains registered from a user's seed file (issue 23).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 10:00:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """One table, keyed by the domain name."""
    op.create_table(
        'data_domain',
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('options', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'),
                  nullable=False),
        sa.Column('content', sa.Text(), nullable=False),
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('train_rows', sa.Integer(), nullable=False),
        sa.Column('eval_rows', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_data_domain')),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table('data_domain')
