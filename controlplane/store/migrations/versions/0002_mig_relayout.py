"""MIG re-layout state machines

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'mig_relayouts',
        sa.Column('relayout_id', sa.String(length=200), nullable=False),
        sa.Column('node', sa.String(length=200), nullable=False),
        sa.Column('pool', sa.String(length=100), nullable=False),
        sa.Column('product', sa.String(length=64), nullable=False),
        sa.Column('from_config', sa.String(length=100), nullable=False),
        sa.Column('to_config', sa.String(length=100), nullable=False),
        sa.Column('to_layout_json', sa.Text(), nullable=False),
        sa.Column('phase', sa.String(length=32), nullable=False),
        sa.Column('active', sa.Boolean(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('deadline_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('surge_nodes', sa.Integer(), nullable=False),
        sa.Column('wait_reason', sa.Text(), nullable=False),
        sa.Column('alert', sa.Text(), nullable=False),
        sa.Column('reason', sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint('relayout_id'),
    )
    with op.batch_alter_table('mig_relayouts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_mig_relayouts_node'), ['node'], unique=False)
        batch_op.create_index(batch_op.f('ix_mig_relayouts_phase'), ['phase'], unique=False)
        batch_op.create_index(batch_op.f('ix_mig_relayouts_active'), ['active'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('mig_relayouts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_mig_relayouts_active'))
        batch_op.drop_index(batch_op.f('ix_mig_relayouts_phase'))
        batch_op.drop_index(batch_op.f('ix_mig_relayouts_node'))
    op.drop_table('mig_relayouts')
