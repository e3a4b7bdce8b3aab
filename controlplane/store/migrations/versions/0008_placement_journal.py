"""Placement journal: the bindings and fleet plan every placement server on the store follows

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
    journal = op.create_table(
        'placement_journal',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('version', sa.BigInteger(), nullable=False),
        sa.Column('pruned_version', sa.BigInteger(), nullable=False),
        sa.Column('plan_version', sa.BigInteger(), nullable=False),
        sa.Column('plan_revision', sa.BigInteger(), nullable=False),
        sa.Column('plan', sa.LargeBinary(), nullable=True),
        sa.Column('changed_by', sa.String(length=200), nullable=False),
        sa.Column('changed_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.bulk_insert(journal, [{'id': 1, 'version': 0, 'pruned_version': 0, 'plan_version': 0,
                              'plan_revision': 0, 'plan': None, 'changed_by': '',
                              'changed_at': None}])
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
        sa.Column('version', sa.BigInteger(), nullable=False),
        sa.Column('released_version', sa.BigInteger(), nullable=True),
        sa.Column('bound_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('workload_id'),
    )
    op.create_index('ix_placement_bindings_version', 'placement_bindings', ['version'])
    op.create_index('ix_placement_bindings_released_version', 'placement_bindings',
                    ['released_version'])


def downgrade() -> None:
    op.drop_index('ix_placement_bindings_released_version', table_name='placement_bindings')
    op.drop_index('ix_placement_bindings_version', table_name='placement_bindings')
    op.drop_table('placement_bindings')
    op.drop_table('placement_journal')
