"""Plans record the replicas running beyond their placement (``kept_json``: a JSON list of
{model, tenant, product, replicas, gpu_share}), those a guard keeps over the target while it
holds a scale-down back and those of a model held while unplaced, so showback bills their GPUs
to the model rather than as idle. NULL on plans saved before: not known, billed as then

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('plans') as table:
        table.add_column(sa.Column('kept_json', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('plans') as table:
        table.drop_column('kept_json')
