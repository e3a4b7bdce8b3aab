"""Node names as long as Kubernetes allows (253 characters; a relayout id adds 16)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 05:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

#: the columns that hold a node's name (an action's target may be one)
NODE_COLUMNS = (('nodes', 'name'), ('gpus', 'node'), ('actions', 'target'),
                ('mig_relayouts', 'relayout_id'), ('mig_relayouts', 'node'))


def upgrade() -> None:
    for table, column in NODE_COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, existing_type=sa.String(length=200),
                               type_=sa.String(length=300), existing_nullable=False)


def downgrade() -> None:
    for table, column in reversed(NODE_COLUMNS):
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, existing_type=sa.String(length=300),
                               type_=sa.String(length=200), existing_nullable=False)
