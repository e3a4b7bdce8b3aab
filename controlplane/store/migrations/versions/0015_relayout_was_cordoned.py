"""MIG relayouts record whether someone else had cordoned the node before the relayout did, so
the relayout leaves that cordon in place (False on rows saved before: the relayout's own)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 21:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('mig_relayouts') as table:
        table.add_column(sa.Column('was_cordoned', sa.Boolean(), nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table('mig_relayouts') as table:
        table.drop_column('was_cordoned')
