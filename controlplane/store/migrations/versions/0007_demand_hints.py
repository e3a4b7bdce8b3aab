"""Demand hints: a model's demand announced ahead, a floor on its forecast over a window

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 11:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'demand_hints',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('model', sa.String(length=200), nullable=False),
        sa.Column('rate_rps', sa.Float(), nullable=False),
        sa.Column('start_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('end_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('reason', sa.String(length=500), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_demand_hints_model', 'demand_hints', ['model'])
    op.create_index('ix_demand_hints_end_at', 'demand_hints', ['end_at'])


def downgrade() -> None:
    op.drop_index('ix_demand_hints_end_at', table_name='demand_hints')
    op.drop_index('ix_demand_hints_model', table_name='demand_hints')
    op.drop_table('demand_hints')
