"""Profile correction: each observation's mean latency (with its ready replicas, a sample of the
model's throughput at its SLO) and each tick's profile corrections

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 02:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('observations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('mean_latency_ms', sa.Float(), nullable=True))
    with op.batch_alter_table('ticks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('profiles_json', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('ticks', schema=None) as batch_op:
        batch_op.drop_column('profiles_json')
    with op.batch_alter_table('observations', schema=None) as batch_op:
        batch_op.drop_column('mean_latency_ms')
