"""Bindings record what their Place asked of each GPU (``gpu_products``: a JSON list of the
allowed products' keys, ``gpu_memory_request_mib``: the per-GPU memory it stated), so every
placement server of the store releases on a re-SyncInventory the bindings whose GPU no longer
meets their request ('[]' and 0 on rows journaled before: any product, no memory stated)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05 03:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('placement_bindings') as table:
        table.add_column(sa.Column('gpu_products', sa.Text(), nullable=False,
                                   server_default='[]'))
        table.add_column(sa.Column('gpu_memory_request_mib', sa.BigInteger(), nullable=False,
                                   server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('placement_bindings') as table:
        table.drop_column('gpu_memory_request_mib')
        table.drop_column('gpu_products')
