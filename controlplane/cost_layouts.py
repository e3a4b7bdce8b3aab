"""Read the GPUs each stored plan places into cost-model values: identical GPUs (product and
segments) grouped with counts (``placed_usage``), read in bulk for many plans at once. Part of
``controlplane.cost_reader``, which re-exports it."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from sqlalchemy import Engine, Select, select
from sqlmodel import SQLModel

import controlplane.store.tables  # noqa: F401  (registers the tables in the metadata)
from controlplane.domain.cost import GpuUsage, SliceUse


def _fetch_columns(engine: Engine, query: Select[Any], into: list[list[Any]]) -> None:
    """Append the rows of a query whose only parameters are integers to ``into``, one list per
    column, through the driver's own cursor (skips per-row result processing; literal integers
    are safe to inline). Read a few hundred rows at a time: each row tuple is freed before the
    garbage collector's youngest generation fills, so a read of many rows promotes none of them
    to the old generations, whose full collections scan the whole (large) heap of the page's
    process."""
    sql = str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(sql)
        while batch := cursor.fetchmany(_BATCH_ROWS):
            for column, values in zip(into, zip(*batch, strict=True), strict=True):
                column.extend(values)
    finally:
        connection.close()


#: rows a batch of ``_fetch_columns``: under the collector's first threshold (700 allocations)
_BATCH_ROWS = 500
_HASH_SEED = 0x5EED
_T = TypeVar("_T")


def placed_usage(engine: Engine, plan_ids: Iterable[int],
                 tenant_of: Mapping[str, str]) -> dict[int, tuple[GpuUsage, ...]]:
    """Each plan's GPUs, grouped into identical layouts (product + segments) with counts.

    A segment's tenant is the one stored with the placement (the model's tenant when the plan
    was written); placements stored before tenants were (NULL) take ``tenant_of`` (the models
    table of today), "unknown" for a model no longer listed.

    Vectorised: a GPU's layout is the multiset of its (model, tenant, compute slices) segments,
    keyed by two independent 64-bit sums of random codes per segment (order-free; a collision
    needs both to agree); segments are read back for one GPU per distinct layout only."""
    placements = SQLModel.metadata.tables["placements"]
    columns = (placements.c.plan_id, placements.c.gpu_id, placements.c.product,
               placements.c.model, placements.c.compute_slices, placements.c.tenant)
    into: list[list[Any]] = [[] for _ in columns]
    plan_col, gpu_col, product_col, model_col, slices_col, tenant_col = into
    for chunk in chunks(sorted(set(plan_ids)), 500):
        _fetch_columns(engine, select(*columns).where(placements.c.plan_id.in_(chunk))
                       .order_by(placements.c.plan_id, placements.c.gpu_id), into)
    if not plan_col:
        return {}
    plan = np.asarray(plan_col, dtype=np.int64)
    gpu = np.asarray(gpu_col, dtype=object)
    slices = np.clip(np.asarray(slices_col, dtype=np.int64), 0, 63)
    model_code, models = pd.factorize(np.asarray(model_col, dtype=object))
    product_code, products = pd.factorize(np.asarray(product_col, dtype=object))
    today = np.asarray([tenant_of.get(str(m), "unknown") for m in models], dtype=object)
    stored = np.asarray(tenant_col, dtype=object)
    tenant_code, tenant_names = pd.factorize(
        np.where(pd.isna(stored), today[model_code], stored))
    starts = np.flatnonzero(np.r_[True, (plan[1:] != plan[:-1]) | (gpu[1:] != gpu[:-1])])
    ends = np.r_[starts[1:], len(plan)]
    pair_code, _ = pd.factorize(model_code.astype(np.int64) * len(tenant_names) + tenant_code)
    segment = pair_code.astype(np.int64) * 64 + slices
    codes = np.random.default_rng(_HASH_SEED).integers(
        0, 2**63, size=(2, int(segment.max()) + 1), dtype=np.uint64)
    with np.errstate(over="ignore"):
        keys = [np.add.reduceat(codes[i][segment], starts).view(np.int64) for i in (0, 1)]
    per_gpu = np.stack([plan[starts], product_code[starts], keys[0], keys[1]], axis=1)
    layouts, first, counts = np.unique(per_gpu, axis=0, return_index=True, return_counts=True)
    # the (layout, count) pairs the plans hold: a few hundred distinct among tens of thousands
    pairs = np.column_stack([layouts[:, 1:], counts])
    distinct, pair_at, usage_of = np.unique(pairs, axis=0, return_index=True,
                                            return_inverse=True)
    shapes: dict[tuple[int, int, int], tuple[SliceUse, ...]] = {}
    usages = np.empty(len(distinct), dtype=object)
    for i, ((product, k0, k1, count), gpu_at) in enumerate(zip(
            distinct.tolist(), first[pair_at].tolist(), strict=True)):
        shape = shapes.get((product, k0, k1))
        if shape is None:
            lo, hi = int(starts[gpu_at]), int(ends[gpu_at])
            shape = tuple(sorted(
                (SliceUse(str(m), str(t), int(s)) for m, t, s in zip(
                    models[model_code[lo:hi]], tenant_names[tenant_code[lo:hi]], slices[lo:hi],
                    strict=True)),
                key=lambda u: (u.model, u.tenant, u.compute_slices)))
            shapes[(product, k0, k1)] = shape
        usages[i] = GpuUsage(str(products[product]), shape, count)
    # plans laid out alike share one tuple: a fleet kept tick after tick compares in no time
    usage_of = usage_of.ravel()
    plan_of = layouts[:, 0]
    bounds = np.flatnonzero(np.r_[True, plan_of[1:] != plan_of[:-1], True]).tolist()
    alike: dict[bytes, tuple[GpuUsage, ...]] = {}
    out: dict[int, tuple[GpuUsage, ...]] = {}
    for lo, hi in itertools.pairwise(bounds):
        signature = usage_of[lo:hi].tobytes()
        layout = alike.get(signature)
        if layout is None:
            layout = alike[signature] = tuple(usages[usage_of[lo:hi]])
        out[int(plan_of[lo])] = layout
    return out


def chunks(values: Sequence[_T], size: int) -> Iterable[Sequence[_T]]:
    for i in range(0, len(values), size):
        yield values[i:i + size]
