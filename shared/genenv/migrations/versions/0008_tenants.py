"""run.tenant and experiment.tenant: the tenant that created a run or an experiment (issue 33); rows made before
tenants belong to the default tenant, so they stay visible as before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 09:00:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Add the columns (server default 'default') with an index each: every list filters on them."""
    for table in ('experiment', 'run'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('tenant', sa.String(length=64), server_default='default', nullable=False))
            batch_op.create_index(batch_op.f(f'ix_{table}_tenant'), ['tenant'], unique=False)


def downgrade() -> None:
    """Drop them (every row is visible to every token again)."""
    for table in ('run', 'experiment'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_index(batch_op.f(f'ix_{table}_tenant'))
            batch_op.drop_column('tenant')
