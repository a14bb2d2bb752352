"""experiment table; run.experiment_id and run.replicate (a run may be a member of an experiment).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 23:40:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the experiment table and the two nullable run columns (existing runs belong to no experiment)."""
    op.create_table(
        'experiment',
        sa.Column('id', sa.String(length=32), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('spec', JSON, nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_experiment')),
    )
    op.create_index(op.f('ix_experiment_status'), 'experiment', ['status'], unique=False)
    with op.batch_alter_table('run') as batch:
        batch.add_column(sa.Column('experiment_id', sa.String(length=32), nullable=True))
        batch.add_column(sa.Column('replicate', sa.Integer(), nullable=True))
        batch.create_index(batch.f('ix_run_experiment_id'), ['experiment_id'], unique=False)
        batch.create_foreign_key(
            batch.f('fk_run_experiment_id_experiment'), 'experiment', ['experiment_id'], ['id'], ondelete='CASCADE'
        )


def downgrade() -> None:
    """Drop the run columns, then the table."""
    with op.batch_alter_table('run') as batch:
        batch.drop_constraint(batch.f('fk_run_experiment_id_experiment'), type_='foreignkey')
        batch.drop_index(batch.f('ix_run_experiment_id'))
        batch.drop_column('replicate')
        batch.drop_column('experiment_id')
    op.drop_index(op.f('ix_experiment_status'), table_name='experiment')
    op.drop_table('experiment')
