"""Placements record their model's tenant as of the plan, so showback of a past day does not
follow later renames or tenant moves in the models table (NULL on rows written before: the
cost reader then takes the models table's tenant of today)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 14:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('placements') as table:
        table.add_column(sa.Column('tenant', sa.String(length=100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('placements') as table:
        table.drop_column('tenant')
