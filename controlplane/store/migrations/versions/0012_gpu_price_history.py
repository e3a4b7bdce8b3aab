"""GPU price history: each product's price changes with when they took effect, so showback of a
past day keeps the price then in force; seeded with the prices in force now, undated (they
apply to everything before the first change recorded after the upgrade)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 14:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'gpu_price_history',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('product', sa.String(length=64), nullable=False),
        sa.Column('price_per_gpu_hour', sa.Float(), nullable=False),
        sa.Column('source', sa.String(length=200), nullable=False),
        sa.Column('as_of', sa.String(length=32), nullable=False),
        sa.Column('effective_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_gpu_price_history_product', 'gpu_price_history', ['product'])
    op.execute("INSERT INTO gpu_price_history (product, price_per_gpu_hour, source, as_of, "
               "effective_at) SELECT product, price_per_gpu_hour, source, as_of, NULL "
               "FROM gpu_prices ORDER BY product")


def downgrade() -> None:
    op.drop_index('ix_gpu_price_history_product', table_name='gpu_price_history')
    op.drop_table('gpu_price_history')
