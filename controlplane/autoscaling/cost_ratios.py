"""The predictive policy's default prices (``controlplane.autoscaling.policies``), apart from
it: ``headroom simulate --help`` shows them without importing the policies."""

from __future__ import annotations

#: Default price of one short model-minute, in replica-hours (hot headroom, ``headroom``).
SHORT_MINUTE_COST_RATIO = 80.0
#: Default price of a replica-hour of unserved demand, in replica-hours (the ladder's rungs).
SHORTFALL_COST_RATIO = 1.5
