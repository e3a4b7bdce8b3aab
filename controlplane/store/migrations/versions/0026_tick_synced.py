"""Ticks record whether they read the fleet (``synced``) beside their snapshot, so the dashboard's
Overview and ``headroom status`` pick the ticks that did without extracting the flag from every
tick's snapshot document (``observed_json``, ~89 kB each on a large fleet: 0.9 GB of JSON for a
week of minute ticks). Filled from the snapshot's flag, absent meaning read; NULL where the
snapshot is empty (read by the snapshot's rule, as then)

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None

#: the snapshot's flag, absent (a store older than the flag) meaning read, per SQL dialect
_FLAG_RULE = {
    'postgresql': "coalesce(CAST(CAST(observed_json AS JSON) -> 'synced' AS TEXT), 'true') "
                  "<> 'false'",
    'sqlite': "coalesce(json_extract(observed_json, '$.synced'), 1) <> 0",
}


def upgrade() -> None:
    with op.batch_alter_table('ticks') as table:
        table.add_column(sa.Column('synced', sa.Boolean(), nullable=True))
    rule = _FLAG_RULE[op.get_bind().dialect.name]
    op.execute(f"UPDATE ticks SET synced = ({rule}) WHERE observed_json <> ''")


def downgrade() -> None:
    with op.batch_alter_table('ticks') as table:
        table.drop_column('synced')
