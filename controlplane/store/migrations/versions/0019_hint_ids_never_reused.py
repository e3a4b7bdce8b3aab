"""Demand hint ids are never reused on SQLite: ``demand_hints`` is rebuilt with AUTOINCREMENT, so
a removed or pruned hint's id is not handed to the next hint (a retried ``RemoveHint`` of the
old id would delete it). PostgreSQL's identity sequence never reuses an id: nothing to do there.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 19:15:00
"""

from __future__ import annotations

from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table("demand_hints", recreate="always",
                              table_kwargs={"sqlite_autoincrement": autoincrement}):
        pass


def upgrade() -> None:
    _rebuild(True)


def downgrade() -> None:
    _rebuild(False)
