"""The models file of ``headroom simulate`` (YAML, DESIGN.md; extra keys allowed) -> typed config.

Errors name the file, the model and the field: ``M.yaml: models[1] (language/m-small):
per_replica_rps: must be > 0, got -3``. A models file never loads half: it is valid or refused,
with every problem of its values listed in one run (``domain.errors.listed_problems``); those
that need the values valid (a duplicate name, a budget's tenant, a cold-start samples file) are
listed together once they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from controlplane.autoscaling.distribution import Durations
from controlplane.autoscaling.sizing import ReplicaShape
from controlplane.domain.cost import DEFAULT_PRICES as LIST_PRICES
from controlplane.domain.errors import listed_problems
from controlplane.domain.models import Isolation
from controlplane.models_yaml import ModelsFileError as ModelsFileError
from controlplane.models_yaml import unique_names, validated
from controlplane.profile_points import PointEntry, placeable
from controlplane.simulation.cells import shown
from controlplane.simulation.fleet_file import MAX_SECONDS, FleetSection, Loose, Seconds
from controlplane.simulation.misspelt_keys import misspelt_keys
from controlplane.simulation.profiled import LATENCY_FIELD, SHAPE_FIELDS, shape_value
from controlplane.simulation.sim_config import (
    DEFAULT_LATENCY_SLO_MS,
    DEFAULT_UNLOADED_LATENCY_MS,
    ColdStartModel,
    FleetConfig,
    SimConfig,
    SimModel,
)
from controlplane.simulation.strict_shares import check_strict_share
from scheduler.domain.sharing import MAX_CLIENTS_PER_GPU

#: On-demand list prices, USD per GPU-hour: the cost model's (REFERENCE.md §10.1, with their
#: sources), so ``simulate`` and the dashboard price a product alike. Override with
#: ``fleet.prices``.
DEFAULT_PRICES: dict[str, float] = {p.product: p.usd_per_gpu_hour for p in LIST_PRICES}


MAX_REPLICA_RPS = 1e7  # requests/s one replica serves: the demand hints' bound too
OPTION = "--cold-start"  # where a cold-start override comes from (it replaces every model's)


class _ColdStart(Loose):
    samples_ms_csv: str | None = None
    p50_s: Seconds | None = None
    p90_s: Seconds | None = None
    cached_max_s: float = Field(10.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False,
                                description="loads up to this are the cached mode")

    @model_validator(mode="after")
    def _complete(self, info: ValidationInfo) -> _ColdStart:
        if self.samples_ms_csv or _checks(info).cold_start_overridden:
            return self
        if self.p50_s is None or self.p90_s is None:
            raise ValueError("give samples_ms_csv or both p50_s and p90_s")
        if self.p90_s < self.p50_s:
            raise ValueError(f"p90_s ({self.p90_s}) < p50_s ({self.p50_s})")
        return self


class _Model(Loose):
    # the fields a shape field's checks (and a profile's best point) read come before it
    name: str = Field(min_length=1)
    tenant: str = Field("default", min_length=1)
    isolation: str = "TRUSTED"
    latency_slo_ms: float = DEFAULT_LATENCY_SLO_MS
    #: ``headroom models import``'s profile, instead of the three fields below (``profiled``)
    profile: list[PointEntry] | None = Field(None, min_length=1)
    gpu_product: str | None = Field(None, min_length=1, validate_default=True)
    per_replica_rps: float | None = Field(None, validate_default=True)
    gpu_per_replica: float | None = Field(None, validate_default=True)
    cold_start: _ColdStart
    #: how long the fleet's replicas really take to start (default: cold_start, it is right);
    #: the policies plan with cold_start, as the live loop plans with the model's spec
    true_cold_start: _ColdStart | None = None
    idle_gpu_fraction: float = Field(1.0, ge=0, le=1)
    #: what a replica really serves within the SLO (default: per_replica_rps, the profile is right)
    true_per_replica_rps: float | None = None
    #: mean latency of an unloaded replica (default: the profile point's, else 300 ms)
    latency_ms: float | None = Field(None, validate_default=True)
    min_replicas: int | None = Field(None, ge=0)  # as `headroom models import`'s
    max_replicas: int | None = Field(None, ge=1)

    @field_validator("profile")
    @classmethod
    def _placeable(cls, value: list[PointEntry] | None, info: ValidationInfo
                   ) -> list[PointEntry] | None:
        if value and "latency_slo_ms" in info.data:  # as `headroom models import` checks it
            isolation = info.data.get("isolation")
            placeable(value, None if isolation is None else Isolation(isolation.lower()),
                      info.data["latency_slo_ms"])
        return value

    @field_validator(*SHAPE_FIELDS, LATENCY_FIELD, mode="before")
    @classmethod
    def _given_or_profiled(cls, value: Any, info: ValidationInfo) -> Any:
        return shape_value(info.field_name or "", value, info.data,
                           _checks(info).offered or _fleet_prices(info) or DEFAULT_PRICES)

    @field_validator("per_replica_rps", "true_per_replica_rps", "latency_slo_ms", "latency_ms")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise ValueError(f"must be > 0, got {value}")
        return value

    @field_validator("per_replica_rps", "true_per_replica_rps")
    @classmethod
    def _possible_rate(cls, value: float | None) -> float | None:
        if value is not None and value > MAX_REPLICA_RPS:
            raise ValueError(f"must be at most {MAX_REPLICA_RPS:g} requests/s per replica, "
                             f"got {value:g}")
        return value

    @field_validator("gpu_product")
    @classmethod
    def _priced(cls, value: str | None, info: ValidationInfo) -> str | None:
        priced = _fleet_prices(info)
        if priced is not None and value is not None and value not in priced:
            raise ValueError(f"no price for {value!r}; set fleet.prices")
        return value

    @field_validator("gpu_per_replica")
    @classmethod
    def _possible_share(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None:  # a profile's problems are listed
            return value
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"must be > 0, got {value}")
        if value > 1 and abs(value - round(value)) > 1e-9:
            raise ValueError(f"above 1 must be a whole number of GPUs, got {value}")
        isolation, product = info.data.get("isolation"), info.data.get("gpu_product")
        if isolation == "STRICT" and product is not None:
            check_strict_share(value, product)
        if value < 1 / MAX_CLIENTS_PER_GPU - 1e-4:  # 0.0208 is 1/48 written short
            raise ValueError(f"at most {MAX_CLIENTS_PER_GPU} replicas share a GPU (MPS clients; "
                             f"time-slices alike), so a share is >= 1/{MAX_CLIENTS_PER_GPU}, "
                             f"got {value}")
        fleet = _checks(info).fleet
        if fleet is not None and product is not None:
            gpus, key = fleet.node_gpus(product)
            if value > gpus:
                raise ValueError(f"{value} GPUs do not fit a node of {key}={gpus}")
        return value

    @field_validator("isolation")
    @classmethod
    def _known_isolation(cls, value: str) -> str:
        if value.upper() not in ("STRICT", "TRUSTED", "NONE"):
            raise ValueError(f"must be STRICT, TRUSTED or NONE, got {value!r}")
        return value.upper()

    @field_validator("latency_ms")
    @classmethod
    def _below_the_slo(cls, value: float | None, info: ValidationInfo) -> float | None:
        slo_ms = info.data.get("latency_slo_ms")
        if slo_ms is not None and value is not None and value >= slo_ms:
            raise ValueError(f"the unloaded latency must be below latency_slo_ms ({slo_ms:g}), "
                             f"got {value:g}")
        return value

    @field_validator("max_replicas")
    @classmethod
    def _not_below_the_min(cls, value: int | None, info: ValidationInfo) -> int | None:
        low = info.data.get("min_replicas")
        if value is not None and low is not None and value < low:
            raise ValueError(f"{value} is below min_replicas {low}")
        return value


class _File(Loose):
    models: list[_Model] = Field(min_length=1)
    fleet: FleetSection = FleetSection()


@dataclass(frozen=True, slots=True)
class _Checks:
    """What a model's checks read beyond the model (pydantic's validation context): the file's
    fleet, None when it is not valid itself (its problems are listed, and the checks of the
    models against it wait for it), whether ``--cold-start`` replaces every model's own, and
    the GPU products of ``--config``'s pools (None: the products the fleet prices), among
    which a profile's best point is chosen, as the live loop chooses it."""

    fleet: FleetSection | None = None
    cold_start_overridden: bool = False
    offered: tuple[str, ...] | None = None


def _checks(info: ValidationInfo) -> _Checks:
    return info.context if isinstance(info.context, _Checks) else _Checks()


def _fleet_prices(info: ValidationInfo) -> dict[str, float] | None:
    """USD per GPU-hour of each product the file's fleet prices (the list prices and its
    ``fleet.prices``); None while the fleet is invalid."""
    fleet = _checks(info).fleet
    return None if fleet is None else {**DEFAULT_PRICES, **fleet.prices}


def _checks_of(cold_start_override: _ColdStart | None, offered: tuple[str, ...] | None
               ) -> Callable[[dict[str, Any]], _Checks]:
    def checks(raw: dict[str, Any]) -> _Checks:
        try:
            fleet: FleetSection | None = FleetSection.model_validate(raw.get("fleet", {}))
        except ValidationError:  # listed with the file's other problems
            fleet = None
        return _Checks(fleet, cold_start_override is not None, offered)
    return checks


def _read_samples(path: Path, where: str) -> Durations:
    """Load latencies (column ``value``, ms) -> seconds; ``where`` names the field at fault."""
    if not path.is_file():
        raise ModelsFileError(f"{where}: no such file {path}")
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ModelsFileError(f"{where}: {path}: empty file: expected a column 'value' of load "
                              "latencies (ms)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ModelsFileError(f"{where}: {path}: not a readable CSV "
                              f"({str(error).splitlines()[0]})") from None
    if "value" not in frame.columns:
        raise ModelsFileError(f"{where}: {path} has no column 'value' "
                              f"(found {list(frame.columns)})")
    if frame.empty:
        raise ModelsFileError(f"{where}: {path}: no samples: column 'value' has no rows")
    values = pd.to_numeric(frame["value"], errors="coerce")
    bad = values.isna() | ~np.isfinite(values.fillna(0)) | (values <= 0)
    if bad.any():
        line = int(bad.to_numpy().nonzero()[0][0]) + 2
        raise ModelsFileError(f"{where}: {path} line {line}: value must be a finite number > 0 "
                              f"(ms), got {shown(frame['value'].iloc[line - 2])}")
    long = values > MAX_SECONDS * 1000
    if long.any():
        line = int(long.to_numpy().nonzero()[0][0]) + 2
        raise ModelsFileError(f"{where}: {path} line {line}: value must be at most "
                              f"{MAX_SECONDS * 1000:.0f} (ms, a week), got "
                              f"{shown(frame['value'].iloc[line - 2])}")
    return Durations.of(float(v) / 1000 for v in values)


def cold_start_from(spec: _ColdStart, base_dir: Path, cached_default: Durations,
                    where: str) -> ColdStartModel:
    """Empirical samples split at ``cached_max_s`` into the cached and the uncached mode, or a
    lognormal through p50/p90 for uncached starts with the fleet's cached start. ``where`` names
    the spec in errors (``M.yaml: models[0] (a): cold_start`` or ``--cold-start``)."""
    if spec.samples_ms_csv:
        path = (base_dir / spec.samples_ms_csv).resolve()
        samples = _read_samples(path, where if where == OPTION else f"{where}.samples_ms_csv")
        fast, slow = samples.split(spec.cached_max_s)
        return ColdStartModel(fast or cached_default, slow or samples, str(path), path)
    if spec.p50_s is None or spec.p90_s is None:  # checked when read (_ColdStart._complete)
        raise ModelsFileError(f"{where}: give samples_ms_csv or both p50_s and p90_s")
    return ColdStartModel(cached_default, Durations.lognormal(spec.p50_s, spec.p90_s),
                          f"lognormal p50={spec.p50_s}s p90={spec.p90_s}s")


def _sim_model(model: _Model, cold_start: ColdStartModel,
               true_cold_start: ColdStartModel | None) -> SimModel:
    product, rps, share = model.gpu_product, model.per_replica_rps, model.gpu_per_replica
    if product is None or rps is None or share is None:  # checked when read (shape_value)
        raise ModelsFileError(f"model {model.name}: give {', '.join(SHAPE_FIELDS)} or a profile")
    shape = ReplicaShape(model.name, model.tenant, product, share, rps, model.idle_gpu_fraction)
    return SimModel(shape, Isolation(model.isolation.lower()), cold_start,
                    model.true_per_replica_rps, model.latency_slo_ms,
                    model.latency_ms or DEFAULT_UNLOADED_LATENCY_MS,
                    model.min_replicas, model.max_replicas, true_cold_start)


def load_models_file(path: Path, cold_start_override: _ColdStart | None = None,
                     offered: tuple[str, ...] | None = None) -> SimConfig:
    """Parse and check a models file; ``cold_start_override`` replaces every model's cold start;
    a profile is sized by its best point on one of the ``offered`` GPU products (``--config``'s
    pools) where it has one. Every problem is listed (see the module docstring), one line
    each."""
    parsed = validated(path, _File, "'models' and 'fleet'",
                       _checks_of(cold_start_override, offered))
    fleet = parsed.fleet
    cached = Durations.lognormal(fleet.cached_start_s.p50, fleet.cached_start_s.p90)
    override = (None if cold_start_override is None  # the option's problem: not the file's
                else cold_start_from(cold_start_override, path.parent, cached, OPTION))
    found: list[str] = []
    try:
        unique_names(path, [m.name for m in parsed.models])
    except ModelsFileError as error:
        found.append(str(error))
    tenants = sorted({m.tenant for m in parsed.models})
    found += [f"{path}: fleet.tenant_gpu_budgets.{tenant}: no model belongs to tenant "
              f"{tenant!r}; the models' tenants are {', '.join(map(repr, tenants))}"
              for tenant in sorted(set(fleet.tenant_gpu_budgets) - set(tenants))]
    products = sorted({m.gpu_product for m in parsed.models if m.gpu_product})
    found += [f"{path}: fleet.pools.{product}: no model runs on {product!r}; the models' GPU "
              f"products are {', '.join(map(repr, products))}"
              for product in sorted(set(fleet.pools) - set(products))]
    cold_starts: list[tuple[ColdStartModel, ColdStartModel | None]] = []
    for i, m in enumerate(parsed.models):
        where = f"{path}: models[{i}] ({m.name})"
        try:  # --cold-start replaces both: it says how every replica starts
            cold_starts.append((override, None) if override is not None else (
                cold_start_from(m.cold_start, path.parent, cached, f"{where}: cold_start"),
                None if m.true_cold_start is None else cold_start_from(
                    m.true_cold_start, path.parent, cached, f"{where}: true_cold_start")))
        except ModelsFileError as error:
            found.append(str(error))
    if found:
        raise ModelsFileError(listed_problems(found))
    models = tuple(_sim_model(m, *c) for m, c in zip(parsed.models, cold_starts, strict=True))
    return SimConfig(models, FleetConfig(
        node_provision=Durations.lognormal(fleet.node_provision_s.p50, fleet.node_provision_s.p90),
        gpus_per_node=fleet.gpus_per_node, max_nodes=fleet.max_nodes,
        idle_wake_s=fleet.idle_wake_s, prices={**DEFAULT_PRICES, **fleet.prices},
        cluster_gpu_budget=fleet.cluster_gpu_budget,
        tenant_gpu_budgets=dict(fleet.tenant_gpu_budgets), pools=fleet.node_shapes()),
        str(path),
        misspelt_keys(str(path), parsed, list(parsed.models), [m.name for m in parsed.models]))


def parse_cold_start_option(value: str) -> _ColdStart:
    """``--cold-start``: a CSV of load latencies (column ``value``, ms) or ``p50=22,p90=39`` (s)."""
    if "=" not in value:
        return _ColdStart(samples_ms_csv=str(Path(value).resolve()))
    parts: dict[str, float] = {}
    for item in value.split(","):
        key, _, number = item.partition("=")
        try:
            parts[key.strip()] = float(number)
        except ValueError:
            raise ModelsFileError(f"{OPTION}: {item!r} is not KEY=SECONDS") from None
    if set(parts) != {"p50", "p90"}:
        raise ModelsFileError(f"{OPTION}: expected p50=S,p90=S, got {value!r}")
    for key in ("p50", "p90"):
        if not math.isfinite(parts[key]) or parts[key] <= 0:
            raise ModelsFileError(f"{OPTION}: {key} must be a finite number of seconds > 0, got "
                                  f"{parts[key]}")
        if parts[key] > MAX_SECONDS:
            raise ModelsFileError(f"{OPTION}: {key} must be at most {MAX_SECONDS:.0f} seconds (a "
                                  f"week), got {parts[key]}")
    if parts["p90"] < parts["p50"]:
        raise ModelsFileError(f"{OPTION}: p90 ({parts['p90']}) < p50 ({parts['p50']})")
    return _ColdStart(p50_s=parts["p50"], p90_s=parts["p90"])
