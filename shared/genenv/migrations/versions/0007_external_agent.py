"""lease, lease_item, idempotent_reply and rollout.origin: an outside agent leases an external_agent run's tasks
and reports its attempts, stored as rollouts marked with their origin (issue 33).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05 09:00:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Three tables; every existing rollout was made by the workers."""
    op.create_table('idempotent_reply',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('request_sha256', sa.String(length=64), nullable=False),
    sa.Column('response', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], name=op.f('fk_idempotent_reply_run_id_run'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_idempotent_reply')),
    sa.UniqueConstraint('run_id', 'key', name=op.f('uq_idempotent_reply_run_id_key'))
    )
    op.create_table('lease',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('epoch', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], name=op.f('fk_lease_run_id_run'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lease'))
    )
    with op.batch_alter_table('lease', schema=None) as batch_op:
        batch_op.create_index('ix_lease_run_epoch_state', ['run_id', 'epoch', 'state'], unique=False)

    op.create_table('lease_item',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('lease_id', sa.String(length=32), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('reported', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['lease_id'], ['lease.id'], name=op.f('fk_lease_item_lease_id_lease'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_lease_item_task_id_task'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lease_item')),
    sa.UniqueConstraint('lease_id', 'task_id', name=op.f('uq_lease_item_lease_id_task_id'))
    )
    with op.batch_alter_table('lease_item', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lease_item_task_id'), ['task_id'], unique=False)

    with op.batch_alter_table('rollout', schema=None) as batch_op:
        batch_op.add_column(sa.Column('origin', sa.String(length=16), server_default='worker', nullable=False))



def downgrade() -> None:
    """Drop them (and the outside agents' leases with them)."""
    with op.batch_alter_table('rollout', schema=None) as batch_op:
        batch_op.drop_column('origin')

    with op.batch_alter_table('lease_item', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lease_item_task_id'))

    op.drop_table('lease_item')
    with op.batch_alter_table('lease', schema=None) as batch_op:
        batch_op.drop_index('ix_lease_run_epoch_state')

    op.drop_table('lease')
    op.drop_table('idempotent_reply')
