"""Plans record their warm pool per product (``warm_gpus_json``: product -> GPUs kept warm), so
showback bills each warm GPU on the product the plan keeps it on; ``warm_gpus`` stays the fleet
total. NULL on plans saved before: only the total is known, and showback spreads it over the
products with unplaced GPUs (``controlplane.domain.cost.attribute_warm``)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('plans') as table:
        table.add_column(sa.Column('warm_gpus_json', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('plans') as table:
        table.drop_column('warm_gpus_json')
