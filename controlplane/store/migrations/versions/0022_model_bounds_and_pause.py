"""The models table holds each model's replica bounds from the models file (``min_replicas``,
``max_replicas``) and its pause (``headroom models pause``: ``paused_replicas``, ``paused_at``,
``paused_by``); all nullable: no bound, not paused (the rows written before keep today's
behaviour)

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05 11:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None

COLUMNS = ('min_replicas', 'max_replicas', 'paused_replicas', 'paused_at', 'paused_by')


def upgrade() -> None:
    with op.batch_alter_table('models') as table:
        table.add_column(sa.Column('min_replicas', sa.Integer(), nullable=True))
        table.add_column(sa.Column('max_replicas', sa.Integer(), nullable=True))
        table.add_column(sa.Column('paused_replicas', sa.Integer(), nullable=True))
        table.add_column(sa.Column('paused_at', sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column('paused_by', sa.String(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('models') as table:
        for name in reversed(COLUMNS):
            table.drop_column(name)
