"""Store leases: one holder at a time drives what a lease names (the simulated fleet of a store)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 22:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'leases',
        sa.Column('name', sa.String(length=100), nullable=False),
        sa.Column('holder', sa.String(length=200), nullable=False),
        sa.Column('acquired_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('renewed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('duration_s', sa.Integer(), nullable=False),
        sa.Column('transitions', sa.Integer(), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('leases')
