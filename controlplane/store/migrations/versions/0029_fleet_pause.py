"""The fleet's pause (``headroom fleet pause``): one row while the fleet is paused, when and by
whom and why; every reconcile tick reads it and, while it is there, records a dry run and
changes nothing.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'fleet_pause',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('paused_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('paused_by', sa.String(length=100), nullable=False),
        sa.Column('why', sa.String(length=500), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )


def downgrade() -> None:
    op.drop_table('fleet_pause')
