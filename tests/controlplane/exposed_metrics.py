"""The names of every sample Headroom's metrics expose (the loop's and the placement API's, one
registry, as ``headroom serve`` serves them), for tests of what alerts and dashboards name."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from controlplane.metrics import ControlPlaneMetrics
from scheduler.metrics import PlacementMetrics

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}


def exposed_names() -> set[str]:
    """Each family's name, with its counter's ``_total`` or histogram's series names."""
    registry = CollectorRegistry()
    ControlPlaneMetrics(registry)
    PlacementMetrics(registry)
    return {f"{family.name}{suffix}" for family in registry.collect()
            for suffix in ("", *SUFFIXES.get(family.type, ()))}
