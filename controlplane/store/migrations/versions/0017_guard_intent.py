"""A tick's guard memory is saved before it acts (``guard_intents``: one row, replaced each
applying tick), so a tick killed after acting and before its record is saved still holds the
cooldowns and disruption budget of the changes it may have made

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'guard_intents',
        sa.Column('slot', sa.Integer(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('memory_json', sa.Text(), nullable=False),
        sa.Column('writer', sa.Text(), nullable=True),
        sa.Column('after_tick_id', sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint('slot'),
    )


def downgrade() -> None:
    op.drop_table('guard_intents')
