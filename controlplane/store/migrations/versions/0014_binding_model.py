"""Bindings record the model and tenant their Place named, so ListBindings can answer "the
bindings of model M" on every placement server of the store ('' on rows journaled before: not
known)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('placement_bindings') as table:
        table.add_column(sa.Column('model', sa.Text(), nullable=False, server_default=''))
        table.add_column(sa.Column('tenant', sa.Text(), nullable=False, server_default=''))


def downgrade() -> None:
    with op.batch_alter_table('placement_bindings') as table:
        table.drop_column('tenant')
        table.drop_column('model')
