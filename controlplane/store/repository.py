"""Store: the SQL repository every part of Headroom reads and writes through.

Each write is one transaction: a tick report (tick, plan, actions, outcomes, placements) lands
whole or not at all, so a crash never leaves half a decision behind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, inspect
from sqlalchemy import select as select_columns
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, delete, select

from controlplane.domain.cost import DEFAULT_PRICES
from controlplane.domain.desired import PoolSpec
from controlplane.domain.guards import GuardMemory
from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedState
from controlplane.domain.price_history import check_one_price_per_product
from controlplane.domain.profile import ProfileCorrection, ProfileSample
from controlplane.domain.tick import TickReport
from controlplane.store import arrivals, codec, guard_intent, tick_fence, tick_records
from controlplane.store.engine import (
    NO_SCHEMA_ADVICE,
    MigrationError,
    StoreUnavailable,
    check_known_revision,
    make_engine,
    no_store_file,
    read_only_engine,
    redact,
    sqlite_file,
    upgrade,
)
from controlplane.store.migration_lock import DEFAULT_MIGRATION_LOCK_WAIT_S
from controlplane.store.model_digest import model_specs_digested
from controlplane.store.pg_response import DEFAULT_RESPONSE_TIMEOUT_S
from controlplane.store.profiles import newest_profiles
from controlplane.store.stored_columns import stored_names
from controlplane.store.tables import (
    ActionRecord,
    ForecastRecord,
    GpuPriceHistoryRecord,
    GpuPriceRecord,
    GpuRecord,
    ModelRecord,
    NodeRecord,
    ObservationRecord,
    PlacementRecord,
    PlanRecord,
    TickRecord,
)
from controlplane.store.utc import as_utc
from forecaster.types import Forecast, TrafficSeries


def price_label(pool: PoolSpec, at: datetime | None) -> dict[str, str]:
    """``source`` and ``as_of`` of a pool's price: the list price's own (REFERENCE.md) when it
    is the product's list price, else the pool's setting (an operator's negotiated or spot
    price), dated when it was applied."""
    listed = {p.product: p for p in DEFAULT_PRICES}.get(pool.product)
    if listed is not None and listed.usd_per_gpu_hour == pool.price_per_gpu_hour:
        return {"source": listed.source, "as_of": listed.as_of}
    return {"source": f"settings pools[{pool.name}].price_per_gpu_hour",
            "as_of": as_utc(at).date().isoformat() if at is not None else ""}


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._observed_columns: frozenset[str] | None = None

    @classmethod
    def open(cls, url: str, connect_timeout_s: float = 5.0, migrate: bool = False,
             response_timeout_s: float = DEFAULT_RESPONSE_TIMEOUT_S,
             migration_lock_wait_s: float = DEFAULT_MIGRATION_LOCK_WAIT_S) -> Store:
        """``response_timeout_s``: db.response_timeout_s (see ``make_engine``);
        ``migration_lock_wait_s``: db.migration_lock_wait_s (see ``upgrade``)."""
        store = cls(make_engine(url, connect_timeout_s, response_timeout_s=response_timeout_s))
        if migrate:
            try:
                upgrade(store.engine, lock_wait_s=migration_lock_wait_s)
            except MigrationError:
                store.engine.dispose()
                raise
        return store

    @classmethod
    def open_existing(cls, url: str, connect_timeout_s: float = 5.0,
                      response_timeout_s: float = DEFAULT_RESPONSE_TIMEOUT_S) -> Store:
        """A store to read or add to that must already exist: never creates a SQLite file, its
        directory or a schema (StoreUnavailable naming what is missing), nor touches one a newer
        Headroom migrated (MigrationError naming its revision)."""
        store_file = sqlite_file(url)
        if store_file is not None and not store_file.is_file():
            raise no_store_file(url)
        store = cls.open(url, connect_timeout_s, response_timeout_s=response_timeout_s)
        if not inspect(store.engine).has_table("ticks"):
            raise StoreUnavailable(f"store {redact(url)} has no Headroom schema", NO_SCHEMA_ADVICE)
        check_known_revision(store.engine, url)
        return store

    @staticmethod
    def listed_model_count(url: str, connect_timeout_s: float = 5.0,
                           response_timeout_s: float = DEFAULT_RESPONSE_TIMEOUT_S) -> int:
        """How many models the store at ``url`` lists, read without writing anything (see
        ``read_only_engine``): 0 for a database without Headroom's models table."""
        engine = read_only_engine(url, connect_timeout_s, response_timeout_s)
        try:
            if not inspect(engine).has_table(ModelRecord.__tablename__):
                return 0
            with engine.connect() as connection:
                return int(connection.execute(
                    select(func.count()).select_from(ModelRecord)).scalar_one())
        finally:
            engine.dispose()

    def session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    # -- models and prices ---------------------------------------------------------------
    def _upsert(self, table: str, key: str, rows: list[dict[str, Any]]) -> None:
        """Insert rows or update the ones whose ``key`` is there, in one statement: two
        processes starting at once (the demo's or a simulated serve's models and prices) both
        land, where a read-then-insert (``session.merge``) lets one fail on the key."""
        with self.session() as session:
            self._upsert_in(session, table, key, rows)
            session.commit()

    def _upsert_in(self, session: Session, table: str, key: str,
                   rows: list[dict[str, Any]]) -> None:
        """``_upsert`` in ``session``'s transaction, committed with the rest of it."""
        if not rows:
            return
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        insert = dialect.insert(SQLModel.metadata.tables[table]).values(rows)
        session.exec(insert.on_conflict_do_update(
            index_elements=[key],
            set_={name: insert.excluded[name] for name in rows[0] if name != key}))

    def upsert_models(self, specs: Iterable[ModelSpec]) -> None:
        rows = {spec.name: dict(
            name=spec.name, tenant=spec.tenant, isolation=spec.isolation.value,
            engine=spec.engine.value, latency_slo_ms=spec.latency_slo_ms,
            cold_start_p50_s=spec.cold_start.p50_s, cold_start_p90_s=spec.cold_start.p90_s,
            profile_json=codec.profile_to_json(spec.profile), min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas) for spec in specs}  # a pause stays as it is
        self._upsert(ModelRecord.__tablename__, "name", list(rows.values()))

    def model_specs(self) -> list[ModelSpec]:
        return list(model_specs_digested(self.engine)[1])

    def model_names(self) -> list[str]:
        with self.session() as session:
            return list(session.exec(select(ModelRecord.name).order_by(col(ModelRecord.name))))

    def model_tenants(self) -> dict[str, str]:
        """Each model's tenant, as the models table names it."""
        with self.session() as session:
            return dict(session.exec(select(ModelRecord.name, ModelRecord.tenant)).all())

    def upsert_prices(self, pools: Iterable[PoolSpec], at: datetime | None = None,
                      effective_at: datetime | None = None) -> None:
        """One row per product, labelled as the list price only when it is the list price; a
        price the operator configured is labelled as the pool's setting, dated when it takes
        effect (``effective_at``, store time, else ``at``). A price that differs from the
        product's last recorded one is appended to the price history, in force from
        ``effective_at`` (default ``at``, else the store's clock: its newest tick; none yet:
        since always), so past days keep the price they had.

        Prices are per product (settings allow one pool per product): pools of one product at
        different prices raise ``PriceError`` naming them, and nothing is written. The prices
        and their history are one transaction: a failed write leaves both as they were, never a
        new price without the history row dated at its change."""
        pools = list(pools)
        check_one_price_per_product(pools)
        when = effective_at or at or self.last_tick_at()
        # dated when it takes effect (store time: a simulated fleet's clock), not the wall clock
        labelled = {pool.product: (pool.price_per_gpu_hour, price_label(pool, effective_at or at))
                    for pool in pools}
        history = GpuPriceHistoryRecord
        with self.session() as session:
            self._upsert_in(session, GpuPriceRecord.__tablename__, "product", [
                dict(product=product, price_per_gpu_hour=price, **label)
                for product, (price, label) in labelled.items()])
            for product, (price, label) in labelled.items():
                last = session.exec(select(history.price_per_gpu_hour)
                                    .where(history.product == product)
                                    .order_by(col(history.id).desc()).limit(1)).first()
                if last != price:
                    session.add(history(product=product, price_per_gpu_hour=price,
                                        source=label["source"], as_of=label["as_of"],
                                        effective_at=when))
            session.commit()

    # -- observations and inventory ------------------------------------------------------
    def save_observed(self, observed: ObservedState, fence: int | None = None) -> None:
        """Inventory snapshot (replaces nodes and GPUs) plus one observation row per model
        whose demand was measured (a model the load source could not measure gets none: its
        history has a gap there, not a 0). ``fence``: saved only while it is the newest fencing
        token (``Fenced`` otherwise, nothing saved), as the leader's tick records are; None:
        unfenced.

        Two processes saving at once (two replicas ticking, or a dry run beside the live loop)
        replace the inventory one after the other: on PostgreSQL each takes the inventory
        tables' write lock first (readers are not blocked), where its delete would otherwise
        miss the other's new rows and its inserts collide with them (or deadlock); SQLite
        serializes writers on its own."""
        with self.session() as session:
            tick_fence.check(session.connection(), fence)
            if self.engine.dialect.name == "postgresql":
                session.connection().exec_driver_sql(
                    "LOCK TABLE nodes, gpus IN SHARE ROW EXCLUSIVE MODE")
            session.exec(delete(GpuRecord))
            session.exec(delete(NodeRecord))
            for node in observed.nodes:
                session.add(NodeRecord(name=node.name, pool=node.pool, product=node.product,
                                       ready=node.ready, cordoned=node.cordoned,
                                       cpu_milli=node.cpu_milli, memory_mib=node.memory_mib,
                                       updated_at=observed.synced_at))
                for gpu in node.gpus:
                    session.add(GpuRecord(node=node.name, index=gpu.index, product=gpu.product,
                                          memory_mib=gpu.memory_mib, mig_capable=gpu.mig_capable,
                                          sharing=gpu.sharing, mig_layout=",".join(gpu.mig_layout)))
            for model in observed.models:
                if not model.demand_measured:  # unknown, not 0: no row (a gap in history)
                    continue
                session.add(ObservationRecord(model=model.name, at=observed.synced_at,
                                              demand_rps=model.demand_rps,
                                              capacity_rps=model.capacity_rps,
                                              replicas_ready=model.replicas_ready,
                                              latency_ms=model.latency_ms,
                                              queued_requests=model.queued_requests,
                                              kv_cache_usage=model.kv_cache_usage,
                                              arrivals_rps=arrivals.recorded(model)))
            session.commit()

    def save_observations(self, rows: Sequence[tuple[str, datetime, float]],
                          fence: int | None = None) -> None:
        """Bulk history rows (model, at, demand_rps), e.g. a backfilled synthetic day;
        ``fence`` as ``save_observed``'s (None: unfenced)."""
        with self.session() as session:
            tick_fence.check(session.connection(), fence)
            session.add_all([ObservationRecord(model=m, at=at, demand_rps=rps, capacity_rps=0.0,
                                               replicas_ready=0) for m, at, rps in rows])
            session.commit()

    def rate_history(self, model: str, since_at: datetime, until_at: datetime,
                     step_s: int) -> TrafficSeries:
        """The requests that arrived for one model as a regular series: mean per step, NaN
        where no data (``arrivals.rate_history``)."""
        return arrivals.rate_history(self.engine, self._observation_columns(), model, since_at,
                                     until_at, step_s)

    def _observation_columns(self) -> frozenset[str]:
        """The observations' columns, read once: a store older than migration 0030 has no
        ``arrivals_rps`` (``open_existing`` reads stores not yet upgraded)."""
        if self._observed_columns is None:
            self._observed_columns = stored_names(self.engine, "observations")
        return self._observed_columns

    def profile_samples(self, since_at: datetime,
                        until_at: datetime) -> dict[str, tuple[ProfileSample, ...]]:
        """Each model's samples in (since_at, until_at], oldest first: its demand per ready
        replica and the latency, from the observations that measured a latency with a
        replica ready (one query for every model, of the columns it needs: an ORM object per
        row took seconds of every tick of a large fleet)."""
        with self.session() as session:
            rows = session.execute(
                select_columns(col(ObservationRecord.model), col(ObservationRecord.at),
                               col(ObservationRecord.demand_rps),
                               col(ObservationRecord.replicas_ready),
                               col(ObservationRecord.latency_ms))
                .where(col(ObservationRecord.at) > since_at)
                .where(col(ObservationRecord.at) <= until_at)
                .where(col(ObservationRecord.latency_ms).is_not(None))
                .where(col(ObservationRecord.replicas_ready) > 0)
                .order_by(col(ObservationRecord.at), col(ObservationRecord.id))).tuples().all()
        out: dict[str, list[ProfileSample]] = {}
        for model, at, demand_rps, replicas_ready, latency_ms in rows:
            assert latency_ms is not None
            out.setdefault(model, []).append(ProfileSample(
                as_utc(at), demand_rps / replicas_ready, latency_ms))
        return {model: tuple(samples) for model, samples in out.items()}

    def last_observed_at(self, model: str) -> datetime | None:
        with self.session() as session:
            at = session.exec(select(func.max(ObservationRecord.at))
                              .where(ObservationRecord.model == model)).first()
        return as_utc(at) if at is not None else None

    def peak_rps_since(self, model: str, since_at: datetime) -> float | None:
        return arrivals.peak_rps_since(self.engine, self._observation_columns(), model, since_at)

    def last_observed(self) -> ObservedState | None:
        with self.session() as session:
            row = session.exec(select(TickRecord.observed_json)
                               .order_by(col(TickRecord.id).desc()).limit(1)).first()
        return codec.observed_from_json(row) if row else None

    # -- forecasts ------------------------------------------------------------------------
    def save_forecasts(self, forecasts: Sequence[Forecast], computed_at: datetime,
                       fence: int | None = None) -> None:
        """``fence``: saved only while it is the newest fencing token (``Fenced`` otherwise,
        none saved), as the leader's tick records are; None: unfenced (a scheduled
        ``headroom forecast run``)."""
        with self.session() as session:
            tick_fence.check(session.connection(), fence)
            session.add_all([ForecastRecord(
                model=f.series_id, computed_at=computed_at, origin_at=f.origin_at, step_s=f.step_s,
                p50_json=json.dumps(list(f.p50)), p90_json=json.dumps(list(f.p90)),
                method=f.method, fallback_reason=f.fallback_reason, backtest_wape=f.backtest_wape,
                notes_json=codec.notes_to_json(f.notes),
            ) for f in forecasts])
            session.commit()

    def latest_forecasts(self) -> dict[str, Forecast]:
        newest = (select(ForecastRecord.model, func.max(ForecastRecord.id).label("id"))
                  .group_by(col(ForecastRecord.model)).subquery())
        with self.session() as session:
            rows = session.exec(select(ForecastRecord).join(
                newest, col(ForecastRecord.id) == newest.c.id)).all()
        return {r.model: Forecast(
            series_id=r.model, origin_at=as_utc(r.origin_at), step_s=r.step_s,
            p50=tuple(json.loads(r.p50_json)), p90=tuple(json.loads(r.p90_json)),
            method=r.method, fallback_reason=r.fallback_reason, backtest_wape=r.backtest_wape,
            notes=codec.notes_from_json(r.notes_json),
        ) for r in rows}

    # -- decisions ------------------------------------------------------------------------
    def save_tick(self, report: TickReport, fence: int | None = None) -> int:
        """``fence``: saved only while it is the newest fencing token (``Fenced`` otherwise,
        nothing saved); None: unfenced."""
        with self.session() as session:
            tick_fence.check(session.connection(), fence)
            tick_id = tick_records.add_tick(session, report)
            session.commit()
            return tick_id

    def last_guard_memory(self) -> GuardMemory:
        """The newest tick's guard memory, or the one a tick saved before acting when that
        tick left no record (``controlplane.store.guard_intent``); empty when neither."""
        with self.engine.connect() as connection:
            return guard_intent.newest_guard_memory(connection)

    def save_intent(self, started_at: datetime, memory: GuardMemory,
                    writer: str | None = None, fence: int | None = None) -> None:
        with self.engine.begin() as connection:
            tick_fence.check(connection, fence)
            guard_intent.save_intent(connection, started_at, memory, writer)

    def claim_fence(self, holder: str, now: datetime) -> int:
        """The next fencing token of the tick records, claimed by a new leadership term."""
        with self.engine.begin() as connection:
            return tick_fence.claim(connection, holder, now)

    def last_profiles(self) -> tuple[ProfileCorrection, ...]:
        """The profiles the newest tick that recorded any sized its models with."""
        with self.engine.connect() as connection:
            return newest_profiles(connection)

    def last_tick_at(self) -> datetime | None:
        with self.session() as session:
            row = session.exec(select(func.max(TickRecord.started_at))).first()
        return as_utc(row) if row else None

    def counts(self) -> dict[str, int]:
        with self.session() as session:
            return {
                "ticks": session.exec(select(func.count()).select_from(TickRecord)).one(),
                "plans": session.exec(select(func.count()).select_from(PlanRecord)).one(),
                "placements": session.exec(select(func.count()).select_from(PlacementRecord)).one(),
                "actions": session.exec(select(func.count()).select_from(ActionRecord)).one(),
                "forecasts": session.exec(select(func.count()).select_from(ForecastRecord)).one(),
            }


def history_window(now: datetime, history_s: int) -> tuple[datetime, datetime]:
    return now - timedelta(seconds=history_s), now
