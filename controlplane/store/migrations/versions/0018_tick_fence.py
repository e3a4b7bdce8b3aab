"""Tick records and guard intents are saved under a fencing token (``tick_fences``: one row
whose token each new leadership term claims), so a deposed leader's late save cannot become the
store's newest guard memory

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'tick_fences',
        sa.Column('name', sa.String(length=100), nullable=False),
        sa.Column('token', sa.Integer(), nullable=False),
        sa.Column('holder', sa.String(length=200), nullable=False),
        sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('tick_fences')
