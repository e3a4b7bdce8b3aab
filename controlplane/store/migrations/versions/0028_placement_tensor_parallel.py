"""A placement row says which replica of several GPUs (tensor parallel) its GPU is part of: the
replica's GPUs (``gpus``) and this one's index among them (``gpu_index``), so the dashboard draws
the replica's GPUs as one replica's and a reader counts it once. A row written before holds a
replica of one GPU (1, 0): no plan had any other.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07 17:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('placements') as table:
        table.add_column(sa.Column('gpus', sa.Integer(), nullable=False, server_default='1'))
        table.add_column(sa.Column('gpu_index', sa.Integer(), nullable=False,
                                   server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('placements') as table:
        table.drop_column('gpu_index')
        table.drop_column('gpus')
