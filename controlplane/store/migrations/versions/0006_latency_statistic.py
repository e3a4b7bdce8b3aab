"""An observation's latency is the configured statistic (the mean, or a quantile such as p95
from a latency histogram): observations.mean_latency_ms becomes latency_ms, its values kept

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 11:00:00
"""

from __future__ import annotations

from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('observations', schema=None) as batch_op:
        batch_op.alter_column('mean_latency_ms', new_column_name='latency_ms')


def downgrade() -> None:
    with op.batch_alter_table('observations', schema=None) as batch_op:
        batch_op.alter_column('latency_ms', new_column_name='mean_latency_ms')
