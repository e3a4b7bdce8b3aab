"""Forecasts keep their notes (``notes_json``: a JSON list of lines saying what was done to the
model's history on the way, e.g. negative values clipped to 0). NULL on forecasts saved
before, and on those without notes: nothing noted

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('forecasts') as table:
        table.add_column(sa.Column('notes_json', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('forecasts') as table:
        table.drop_column('notes_json')
