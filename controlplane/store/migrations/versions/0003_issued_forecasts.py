"""Issued forecasts the reconcile loop calibrates its upper tail from

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'issued_forecasts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('model', sa.String(length=200), nullable=False),
        sa.Column('target_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('step_s', sa.Integer(), nullable=False),
        sa.Column('p50_rps', sa.Float(), nullable=False),
        sa.Column('p90_rps', sa.Float(), nullable=False),
        sa.Column('sigma', sa.Float(), nullable=False),
        sa.Column('observed_rps', sa.Float(), nullable=True),
        sa.Column('scored_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('model', 'target_at', name='uq_issued_forecasts_model_at'),
    )
    with op.batch_alter_table('issued_forecasts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_issued_forecasts_target_at'), ['target_at'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('issued_forecasts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_issued_forecasts_target_at'))
    op.drop_table('issued_forecasts')
