"""The observations' (model, at) index carries each row's demand and capacity too: the requests
served per model and day are read from the index alone

``cost_reader.served_requests`` (the Cost page, the Overview's $ per 1M requests, ``cost
export``) reads them once a day of the window. Through the (model, at) index each row was
fetched from the table, where a model's rows of a day lie one to a page among every other
model's: 1.3 s a day of 200 models observed once a minute, 9 s for the Cost page's week. The
wider index serves every read the (model, at) one did (its leading columns), so it replaces it.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06 01:00:00
"""

from __future__ import annotations

from alembic import op

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_observations_model_at_load', 'observations',
                    ['model', 'at', 'demand_rps', 'capacity_rps'])
    op.drop_index('ix_observations_model_at', table_name='observations')


def downgrade() -> None:
    op.create_index('ix_observations_model_at', 'observations', ['model', 'at'])
    op.drop_index('ix_observations_model_at_load', table_name='observations')
