"""Binding leases: a binding placed with a lease expires unless renewed

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 19:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('placement_bindings') as table:
        table.add_column(sa.Column('lease_s', sa.Float(), nullable=False, server_default='0'))
        table.add_column(sa.Column('lease_expires_at_s', sa.Float(), nullable=False,
                                   server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('placement_bindings') as table:
        table.drop_column('lease_expires_at_s')
        table.drop_column('lease_s')
