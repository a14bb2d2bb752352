"""run.waiting_on: the dependency a running run waits for while it does not answer (issue 31: an outage makes a
run wait, never fail).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 09:00:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """One nullable JSON column: no existing run is waiting."""
    with op.batch_alter_table('run') as batch:
        batch.add_column(sa.Column(
            'waiting_on',
            sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True, astext_type=sa.Text()),
                                                    'postgresql'),
            nullable=True,
        ))


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table('run') as batch:
        batch.drop_column('waiting_on')
