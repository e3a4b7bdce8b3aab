"""An index on the observations' time: every reconcile tick reads the last window of every
model's observations (the profile samples) and the store job deletes those before the retention
cutoff, both by time alone, which the (model, at) index cannot serve: without this each tick
scanned and sorted the whole table, 30 days x every model by default

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 14:40:00
"""

from __future__ import annotations

from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_observations_at', 'observations', ['at'])


def downgrade() -> None:
    op.drop_index('ix_observations_at', table_name='observations')
