"""Ticks record which process wrote them (``writer``: the Kubernetes Lease holder identity of
the ``headroom serve`` replica that led, or the store lease holder of ``serve --backend sim`` and
``headroom demo``), so ``headroom status`` can say who leads and when that changed (NULL on rows
saved before: not known)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('ticks') as table:
        table.add_column(sa.Column('writer', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('ticks') as table:
        table.drop_column('writer')
