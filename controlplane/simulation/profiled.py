"""A ``simulate`` model given by its offline profile, as ``headroom models import``'s models file
writes it, instead of ``gpu_product``, ``per_replica_rps`` and ``gpu_per_replica``: the simulator
sizes it by the point the live loop sizes it by (``domain.models.best_point``: the fastest point
within 0.45 x the latency SLO that its isolation may run, on a product the fleet prices), one
replica of which serves ``replica_rps`` on ``replica_gpu_share`` of a GPU (a point of several
``gpus``: that many whole GPUs serving all its ``throughput_rps``) at the point's
``latency_ms``. So an operator replays a trace against the very models file the loop manages."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from controlplane.domain.models import Isolation, ProfilePoint, best_point
from controlplane.profile_points import PointEntry
from controlplane.simulation.sim_config import DEFAULT_UNLOADED_LATENCY_MS

#: the fields a profile gives, which the file then must not
SHAPE_FIELDS = ("gpu_product", "per_replica_rps", "gpu_per_replica")
#: the field a profile gives unless the file does (the point's latency)
LATENCY_FIELD = "latency_ms"


def profiled_point(data: Mapping[str, Any], products: Collection[str]) -> ProfilePoint | None:
    """The point a model's valid fields so far (``data``: pydantic's ``info.data``) size it by;
    None without a profile, or while the profile, isolation or SLO it needs is invalid (those
    problems are listed on their own)."""
    profile: list[PointEntry] | None = data.get("profile")
    if not profile or "isolation" not in data or "latency_slo_ms" not in data:
        return None
    return best_point(tuple(entry.point() for entry in profile),
                      Isolation(str(data["isolation"]).lower()), float(data["latency_slo_ms"]),
                      products)


def shape_value(field: str, given: Any, data: Mapping[str, Any], products: Collection[str]
                ) -> Any:
    """``field``'s value: as given, or from the model's profile (``profiled_point``; None while
    that is invalid); when neither is given, a shape field is required and the latency is
    ``DEFAULT_UNLOADED_LATENCY_MS``.
    A shape field given beside a profile is refused (ValueError): one of the two would be
    ignored."""
    profiled = "profile" not in data or data["profile"] is not None  # given (perhaps invalid)
    if given is not None:
        if profiled and field in SHAPE_FIELDS:
            raise ValueError("given beside a profile: give one or the other")
        return given
    if not profiled:
        if field in SHAPE_FIELDS:
            raise ValueError("required, unless the model gives a profile (as `headroom models "
                             "import`'s models file writes it)")
        return DEFAULT_UNLOADED_LATENCY_MS
    point = profiled_point(data, products)
    if point is None:
        return None  # the profile's own problems are listed (or its isolation's, its SLO's)
    return {"gpu_product": point.product, "per_replica_rps": point.replica_rps,
            "gpu_per_replica": point.replica_gpu_share, LATENCY_FIELD: point.latency_ms}[field]
