"""A profile point as a models file writes it (``headroom models import``'s, and
``headroom simulate``'s with a ``profile``): the throughput one segment of a slice shape serves
within the latency SLO, checked against the scheduler's catalog (a product it lists, a MIG size
the product offers, memory that fits the slice, MPS processes within CUDA's client limit); or,
with ``gpus`` > 1, what one replica of that many whole GPUs of a node serves (tensor parallel),
``memory_mib`` each GPU's."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from controlplane.domain.models import Isolation, ProfilePoint
from controlplane.yaml_numbers import NoTextForANumber
from scheduler.domain import catalog
from scheduler.domain.fleet_types import SLO_LATENCY_FRACTION
from scheduler.domain.sharing import mps_client_limit
from scheduler.domain.usable_memory import segment_usable_mib
from scheduler.domain.validate import slices_problem, tensor_parallel_problem

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class StrictEntry(NoTextForANumber):
    """A mapping of a models file whose unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PointEntry(StrictEntry):
    """One profile point as a models file writes it."""

    product: str = Field(min_length=1)
    compute_slices: int = Field(0, ge=0, description="MIG size in g; 0 = a whole GPU")
    batch_size: int = Field(1, ge=1)
    mps_processes: int = Field(1, ge=1)
    gpus: int = Field(1, ge=1, description="GPUs one replica spans on one node (tensor "
                                           "parallel): whole GPUs without MPS")
    throughput_rps: Positive
    latency_ms: Positive
    memory_mib: int = Field(ge=0)

    @field_validator("product")
    @classmethod
    def _known_product(cls, product: str) -> str:
        # the settings' pools take only catalog products, so a point for another (a typo: L40
        # for L40S) could never be placed; it is named, as the settings' pools name it
        return catalog.known_product(product)

    @field_validator("mps_processes")
    @classmethod
    def _within_the_mps_limit(cls, processes: int) -> int:
        # the device plugin refuses more MPS clients per GPU: a plan asking for them would fail
        # on every node it lays out
        if processes > catalog.MAX_MPS_CLIENTS:
            raise ValueError(f"must be at most {catalog.MAX_MPS_CLIENTS} (CUDA MPS's client "
                             f"limit per GPU), got {processes}")
        return processes

    @field_validator("mps_processes")
    @classmethod
    def _within_the_segments_mps_limit(cls, processes: int, info: ValidationInfo) -> int:
        # on a MIG instance "the 48-client limit shrinks in proportion to the CI size"
        # (REFERENCE.md §1.1), and a GPU older than Volta serves 16: PlanFleet never lays out
        # a point beyond its segment's limit (``mps_client_limit``)
        slices = info.data.get("compute_slices") or 0
        known = catalog.lookup(info.data.get("product", ""))
        if known is None:
            return processes
        limit = mps_client_limit(known, slices)
        if processes > limit and (not slices or known.compute_slices <= 0):
            raise ValueError(f"must be at most {limit} on a whole {known.name} (CUDA MPS serves "
                             f"{limit} clients on a GPU older than Volta), got {processes}")
        if processes > limit:
            raise ValueError(f"must be at most {limit} on a {slices}g MIG instance of "
                             f"{known.name} (CUDA MPS's {catalog.MAX_MPS_CLIENTS}-client limit "
                             f"shrinks with the instance: x {slices}/{known.compute_slices}), "
                             f"got {processes}")
        return processes

    # the checks across fields are field validators reading the fields before them
    # (``info.data`` holds those that are valid), so that each runs whenever what it reads is
    # valid, not only when the whole point is: one run lists every problem of the file

    @field_validator("compute_slices")
    @classmethod
    def _offered_slices(cls, slices: int, info: ValidationInfo) -> int:
        if "product" in info.data and (
                problem := slices_problem(info.data["product"], slices)) is not None:
            raise ValueError(problem)
        return slices

    @field_validator("gpus")
    @classmethod
    def _whole_gpus_of_one_node(cls, gpus: int, info: ValidationInfo) -> int:
        problem = tensor_parallel_problem(gpus, info.data.get("compute_slices", 0),
                                          info.data.get("mps_processes", 1))
        if problem is not None:
            raise ValueError(problem)
        return gpus

    @field_validator("memory_mib")
    @classmethod
    def _fits_the_slice(cls, memory_mib: int, info: ValidationInfo) -> int:
        if "product" not in info.data or "compute_slices" not in info.data:
            return memory_mib
        known, slices = catalog.lookup(info.data["product"]), info.data["compute_slices"]
        if known is None or not known.memory_mib:
            return memory_mib
        mig = known.standard_profile(slices) if slices else None
        holds_mib = segment_usable_mib(known, slices if mig is not None else 0)
        shape = f"a {mig.name} instance" if mig is not None else f"a whole {known.name}"
        if holds_mib is not None and memory_mib > holds_mib:
            gpus = info.data.get("gpus", 1)  # a replica of several GPUs: each GPU's memory
            each = f": a replica of {gpus} GPUs states each GPU's memory_mib" if gpus > 1 else ""
            raise ValueError(f"{memory_mib} MiB does not fit {shape} ({holds_mib} MiB "
                             f"usable){each}")
        return memory_mib

    def point(self) -> ProfilePoint:
        return ProfilePoint(self.product, self.compute_slices, self.batch_size,
                            self.mps_processes, self.throughput_rps, self.latency_ms,
                            self.memory_mib, self.gpus)


def placeable(profile: list[PointEntry], isolation: Isolation | None, slo_ms: float) -> None:
    """Refuse (ValueError) a profile the fleet plan would never place: no point within
    ``SLO_LATENCY_FRACTION`` x the latency SLO (DESIGN.md: batching headroom) or, for a STRICT
    model (``isolation``; None while it is invalid), no such point without MPS processes (it
    runs on a MIG instance or a whole GPU alone: DESIGN.md, sharing mode choice)."""
    limit_ms = SLO_LATENCY_FRACTION * slo_ms
    if all(p.latency_ms > limit_ms for p in profile):
        fastest = min(p.latency_ms for p in profile)
        raise ValueError(f"no point's latency_ms is within {SLO_LATENCY_FRACTION:g} x "
                         f"latency_slo_ms {slo_ms:g} = {limit_ms:g} ms (the fastest is "
                         f"{fastest:g} ms): the fleet plan would never place it")
    if isolation is Isolation.STRICT and not any(
            p.mps_processes <= 1 and p.latency_ms <= limit_ms for p in profile):
        raise ValueError(f"isolation strict runs without MPS, and no point with "
                         f"mps_processes 1 has latency_ms within {SLO_LATENCY_FRACTION:g} "
                         f"x latency_slo_ms {slo_ms:g} = {limit_ms:g} ms: the fleet plan "
                         "would never place it")
