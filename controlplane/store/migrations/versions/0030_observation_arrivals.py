"""Observations keep the requests that arrived beside those that finished: a saturated vLLM or
SGLang finishes only what its replicas' capacity serves and holds the rest, so ``demand_rps``
(finished) reads its capacity while its demand is higher. ``arrivals_rps`` is what finished
plus how fast the held requests grew, not below 0 (``ObservedModel.arrivals_rps``); NULL where
the growth was not measured (a row written before, the simulator, an engine without the gauges):
there the requests that finished are all that is known to have arrived. The history the loop
calibrates its forecasts against, the traces it exports and the dashboard read it
(``controlplane.store.arrivals``). The (model, at, load) index carries it too, so the requests
asked for per model and day are still read from the index alone (0025).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-08 01:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('observations') as table:
        table.add_column(sa.Column('arrivals_rps', sa.Float(), nullable=True))
    op.drop_index('ix_observations_model_at_load', table_name='observations')
    op.create_index('ix_observations_model_at_load', 'observations',
                    ['model', 'at', 'demand_rps', 'capacity_rps', 'arrivals_rps'])


def downgrade() -> None:
    op.drop_index('ix_observations_model_at_load', table_name='observations')
    op.create_index('ix_observations_model_at_load', 'observations',
                    ['model', 'at', 'demand_rps', 'capacity_rps'])
    with op.batch_alter_table('observations') as table:
        table.drop_column('arrivals_rps')
