"""Placement journal: the placement engine's bindings and current plan, kept across restarts

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 13:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'placement_journal',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('epoch', sa.BigInteger(), nullable=False),
        sa.Column('holder', sa.String(length=200), nullable=False),
        sa.Column('taken_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('plan_revision', sa.BigInteger(), nullable=False),
        sa.Column('plan', sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_table(
        'placement_bindings',
        sa.Column('workload_id', sa.Text(), nullable=False),
        sa.Column('node', sa.Text(), nullable=False),
        sa.Column('gpu_indices', sa.String(length=2000), nullable=False),
        sa.Column('mode', sa.String(length=16), nullable=False),
        sa.Column('mig_profile', sa.String(length=32), nullable=False),
        sa.Column('mig_start', sa.Integer(), nullable=False),
        sa.Column('gpu_milli', sa.Integer(), nullable=False),
        sa.Column('gpu_memory_mib', sa.BigInteger(), nullable=False),
        sa.Column('cpu_milli', sa.BigInteger(), nullable=False),
        sa.Column('memory_mib', sa.BigInteger(), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('bound_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('workload_id'),
    )
    op.create_index('ix_placement_bindings_node', 'placement_bindings', ['node'])


def downgrade() -> None:
    op.drop_index('ix_placement_bindings_node', table_name='placement_bindings')
    op.drop_table('placement_bindings')
    op.drop_table('placement_journal')
