"""Observations keep each model's queued requests and KV cache usage beside its latency, so the
dashboard draws a model's serving signals over time (until now only the newest tick's snapshot
held them). NULL: not measured (a row written before, or an engine that does not report them)

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 02:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('observations') as table:
        table.add_column(sa.Column('queued_requests', sa.Float(), nullable=True))
        table.add_column(sa.Column('kv_cache_usage', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('observations') as table:
        table.drop_column('kv_cache_usage')
        table.drop_column('queued_requests')
