"""``headroom status`` output as Rich tables, then one verdict line, and the one-line texts other
commands print too (hints, leases, replicas). Pure functions of the status and its health; the
JSON document of ``--json`` is ``status_document``'s."""

from __future__ import annotations

from datetime import datetime

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from controlplane.autoscaling.hints import floored_step
from controlplane.cli.status_document import (
    listed_models,
    load_unmeasured,
    slo_judgement,
    utc_or_none,
)
from controlplane.domain.fleet_status import (
    FenceStatus,
    FleetBill,
    FleetStatus,
    ForecastPoint,
    Health,
    LeaseStatus,
    ModelStatus,
    PlacementStatus,
    UnrecordedTick,
    age_s,
    fleet_bill,
)
from controlplane.domain.hints import NOT_LISTED, DemandHint, rps_text
from controlplane.domain.pause import ModelPause
from controlplane.domain.tick_writers import UNKNOWN_WRITER, LeadershipChange

#: the columns of a demand hint's row (``headroom status`` and ``headroom hint list``)
HINT_COLUMNS = ("id", "model", "rps", "start (UTC)", "end (UTC)", "reason")


def hint_cells(h: DemandHint, listed: bool = True) -> tuple[str, ...]:
    """One hint as the cells of a Rich table row (names and reasons escaped); ``listed``:
    whether the models table lists its model."""
    return (str(h.hint_id), escape(h.model) + ("" if listed else NOT_LISTED),
            rps_text(h.rate_rps), f"{h.start_at:%Y-%m-%d %H:%M}", f"{h.end_at:%Y-%m-%d %H:%M}",
            escape(h.reason))


def hint_line(h: DemandHint) -> str:
    """One hint in a line of plain text (``headroom hint add | remove``, ``models remove``)."""
    why = f" ({h.reason})" if h.reason else ""
    return (f"hint {h.hint_id}: {h.model} >= {rps_text(h.rate_rps)} rps from "
            f"{h.start_at:%Y-%m-%d %H:%M:%S} until {h.end_at:%Y-%m-%d %H:%M:%S} UTC{why}")


def load_unmeasured_line(status: FleetStatus) -> str | None:
    """``load not measured for N of M models ...``: above the verdict, since a metrics source
    down leaves every model's load unknown while the loop looks healthy; None when all were."""
    names = load_unmeasured(status)
    if not names:
        return None
    seen = sum(1 for m in status.models if m.observed)
    return (f"load not measured for {len(names)} of {seen} model(s) by tick "
            f"#{status.fleet_tick_id}: {', '.join(names)} (they keep the capacity they have "
            "and nothing scales down on them; the tick's notes say why)")


def _num(value: float | int | None, fmt: str = "{:,.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 0:  # a simulated store's clock runs ahead of the wall clock
        return f"{-seconds:,.0f} s ahead of the wall clock"
    return f"{seconds:,.0f} s ago"


def last_tick_line(status: FleetStatus, health: Health) -> str:
    """The last tick, its age and what the loop's liveness was judged by: that age, or (a
    simulated fleet running, its ticks on its own clock) its lease's renewal."""
    tick = status.last_tick
    if tick is None:
        return "none recorded"
    judged = "" if health.lease_age_s is None or status.lease is None else (
        f"; on the simulated fleet's clock: judged by lease {status.lease.name}, renewed "
        f"{_ago(max(0.0, health.lease_age_s))}")
    return (f"#{tick.tick_id} at {utc_or_none(tick.started_at)} "
            f"({_ago(health.tick_age_s)}{judged}; max {health.max_tick_age_s:g} s)")


def paused_line(pause: ModelPause) -> str:
    return (f"model {pause.model} is {pause.reason()}: held at {pause.held_text()} "
            f"(headroom models resume {pause.model})")


def over_slo_line(model: ModelStatus) -> str | None:
    """Under the models table: the model's latency as the newest tick read it, when above its
    SLO (none when within it, not read, or the model is not listed)."""
    if "latency" not in slo_judgement(model)["short_of_slo"] or (
            model.latency_ms is None or model.latency_slo_ms is None):
        return None
    return (f"{model.name}: latency {model.latency_ms:,.0f} ms, above its SLO of "
            f"{model.latency_slo_ms:,.0f} ms (headroom_model_latency_ms; the loop corrects its "
            "profile from it)")


def slo_cell(model: ModelStatus) -> str:
    """The models table's ``slo`` cell: ``ok``, ``unknown`` or ``short: `` and its reasons
    (capacity, queue, kv_cache, latency), as ``--json``'s ``slo_status`` and ``short_of_slo``."""
    judged = slo_judgement(model)
    reasons = ", ".join(judged["short_of_slo"])
    return f"{judged['slo_status']}: {reasons}" if reasons else str(judged["slo_status"])


def forecast_notes_line(model: str, point: ForecastPoint) -> str:
    """What was done to ``model``'s history before its newest forecast, in one line."""
    return f"forecast of {model} made from cleaned input: {'; '.join(point.notes)}"


def lease_line(lease: LeaseStatus, now: datetime) -> str:
    """Who holds the lease and since when. A released lease (a holder that stopped cleanly writes
    no holder and a 1 s duration, as client-go does) is free: its duration is not the config's."""
    renewed = _ago(age_s(lease.renewed_at, now))
    if not lease.holder:
        return f"released (free to take; last renewed {renewed})"
    return (f"{lease.holder}, renewed {renewed}; another process may take it "
            f"{lease.duration_s} s after the last renewal")


def fence_line(fence: FenceStatus, now: datetime) -> str:
    """The leadership term whose store writes are accepted now."""
    return (f"token {fence.token}, claimed by {fence.holder or UNKNOWN_WRITER} at "
            f"{utc_or_none(fence.claimed_at)} ({_ago(age_s(fence.claimed_at, now))}); a replica's "
            "saves under an older token are refused")


def unrecorded_line(tick: UnrecordedTick, now: datetime) -> str:
    return (f"started at {utc_or_none(tick.started_at)} ({_ago(age_s(tick.started_at, now))}) by "
            f"{tick.writer or UNKNOWN_WRITER}: no record saved yet (in progress, or killed "
            "after it may have acted; the next tick starts from the guard memory it saved "
            "before acting)")


def leadership_line(change: LeadershipChange, now: datetime) -> str:
    """When the ticks' writer (the leading replica) last changed, from whom to whom."""
    return (f"changed at {utc_or_none(change.changed_at)} (tick #{change.first_tick_id}, "
            f"{_ago(age_s(change.changed_at, now))}): {change.previous_writer} -> "
            f"{change.writer}; {change.previous_writer}'s last tick was at "
            f"{utc_or_none(change.previous_tick_at)}")


def placement_line(placement: PlacementStatus, now: datetime) -> str:
    """The placement journal every placement server on the store follows, in one line."""
    changed = ("never changed" if not placement.changed_by else
               f"changed {_ago(age_s(placement.changed_at, now))} by {placement.changed_by}")
    return (f"{placement.bindings} binding(s) on {placement.nodes} node(s), plan revision "
            f"{placement.plan_revision}; journal version {placement.version}, {changed}")


#: between the replica target a model's workload reports and the one the tick wanted
WANTED_ARROW = "->"


def replicas_cell(model: ModelStatus) -> str:
    """``ready/pending/observed target`` (the target the fleet reported, which the newest tick
    read), then ``->`` the desired target that tick wanted when it wanted another (the guards
    pace the way there; the value ``headroom_model_replicas{kind="target"}`` exports), then how
    many of the pending no node has bound, if any: 13/1/14, 13/1/14->16 or 13/2/15 (1
    unscheduled); ``-`` for a model the fleet did not report."""
    if not model.observed:
        return "-"
    cell = f"{model.replicas_ready}/{model.replicas_pending}/{model.replicas_target}"
    wanted = model.replicas_desired
    if wanted is not None and wanted != model.replicas_target:
        cell += f"{WANTED_ARROW}{wanted}"
    unbound = model.replicas_unscheduled
    return f"{cell} ({unbound} unscheduled)" if unbound else cell


#: marks a forecast cell a demand hint raised (``hint_floor_line`` says by how much)
HINTED_MARK = "*"


def _forecast_cells(point: ForecastPoint | None, floor_rps: float | None) -> tuple[str, str]:
    """The p50 and p90 cells as the loop sizes from them: a value a hint's floor raised
    (``floored_step``: p50 to the floor, p90 with it) shows raised, marked ``*``."""
    if point is None:
        return "-", "-"
    if floor_rps is None:
        return _num(point.p50_rps), _num(point.p90_rps)
    step_s = point.ahead_s - (point.target_at - point.origin_at).total_seconds()
    floored = floored_step(point.p50_rps, point.p90_rps, floor_rps, step_s)

    def cell(value: float, raised: float) -> str:
        return f"{_num(raised)}{HINTED_MARK}" if raised > value else _num(value)

    return cell(point.p50_rps, floored[0]), cell(point.p90_rps, floored[1])


def hint_floor_line(model: str, point: ForecastPoint, floor_rps: float,
                    pause: ModelPause | None = None) -> str:
    """Under the models table: a hint raised the model's forecast, what the forecaster said,
    and whether the loop sizes from the floor or a pause holds the model whatever it says."""
    sized = ("the loop sizes from the floor" if pause is None else
             f"the pause overrides it: the model stays at {pause.held_text()} until "
             f"`headroom models resume {model}`")
    return (f"{model}: {HINTED_MARK} a demand hint floors the forecast at {rps_text(floor_rps)} "
            f"rps (the forecaster's p50 {_num(point.p50_rps)}, p90 {_num(point.p90_rps)}); "
            f"{sized} (headroom hint list)")


#: a row name (the first column) up to this long is never broken
FIRST_COLUMN_CHARS = 24


def _table(title: str, *columns: str, header: bool = True) -> Table:
    """A borderless table; its first column names the row and is never broken (the others
    fold when the terminal is too narrow), unless a name is longer (see ``_fitted``)."""
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False,
                  show_header=header)
    for k, column in enumerate(columns):
        table.add_column(column, overflow="fold", no_wrap=k == 0)
    return table


def _fitted(table: Table) -> Table:
    """``table``, its first column folding past FIRST_COLUMN_CHARS when a name is longer: kept
    whole, one name wider than the terminal squeezed every other column to nothing."""
    first = table.columns[0]
    if any(cell_len(cell) > FIRST_COLUMN_CHARS for cell in first.cells if isinstance(cell, str)):
        first.no_wrap, first.min_width = False, FIRST_COLUMN_CHARS
    return table


def render(console: Console, status: FleetStatus, health: Health) -> None:
    """The status as tables, then one verdict line: ``healthy`` or ``unhealthy: ...``."""
    now = health.checked_at
    tick = status.last_tick
    head = _table("Loop", "field", "value", header=False)
    head.add_row("store", escape(status.store))
    if status.fleet_pause is not None:
        head.add_row("fleet paused", escape(status.fleet_pause.line()), style="bold yellow")
    if tick is None:
        head.add_row("last tick", "none recorded")
    else:
        head.add_row("last tick", escape(last_tick_line(status, health)))
        head.add_row("status", escape(tick.status + (f" ({tick.reason})" if tick.reason else "")))
        head.add_row("tick totals", f"{tick.gpus_ready} GPUs ready, demand "
                     f"{tick.demand_rps:,.1f} rps, capacity {tick.capacity_rps:,.1f} rps; "
                     f"{tick.ticks} ticks stored")
        head.add_row("written by", escape(tick.writer or UNKNOWN_WRITER))
        if status.leadership is not None:
            head.add_row("leadership", escape(leadership_line(status.leadership, now)))
        for note in tick.notes:
            head.add_row("note", escape(note))
    if status.unrecorded is not None:
        head.add_row("unrecorded tick", escape(unrecorded_line(status.unrecorded, now)))
    if status.lease is not None:
        head.add_row(f"lease {escape(status.lease.name)}", escape(lease_line(status.lease, now)))
    if status.fence is not None:
        head.add_row("write fence", escape(fence_line(status.fence, now)))
    if status.placement is not None:
        head.add_row("placement", escape(placement_line(status.placement, now)))
    if tick is not None and status.fleet_tick_id != tick.tick_id:
        head.add_row("fleet seen", "never" if status.fleet_tick_id is None else (
            f"by tick #{status.fleet_tick_id} at {utc_or_none(status.fleet_at)} (the last tick "
            "could not read the fleet)"))
    console.print(_fitted(head))
    models = _table(f"Models (replicas ready/pending/observed target{WANTED_ARROW}desired target "
                    "where the tick wanted another; forecast 20 min ahead; tenants in --json)",
                    "model", "rps", "replicas", "capacity", "p50", "p90", "method", "slo")
    for m in status.models:
        f = m.forecast
        observed = _num(m.observed_rps) if m.demand_measured or not m.observed else "unknown"
        if m.queued_requests:
            observed += f" +{m.queued_requests:,.0f} queued"
        if m.kv_cache_usage is not None:
            observed += f" kv {m.kv_cache_usage:.0%}"
        models.add_row(escape(m.name), observed, replicas_cell(m), _num(m.capacity_rps),
                       *_forecast_cells(f, m.hint_floor_rps),
                       "-" if f is None else escape(f.method), slo_cell(m))
    console.print(_fitted(models))
    for m in status.models:
        if m.pause is not None:
            console.print(paused_line(m.pause), markup=False, highlight=False, soft_wrap=True)
        if (over := over_slo_line(m)) is not None:
            console.print(over, markup=False, highlight=False, soft_wrap=True)
        if m.forecast is not None and m.hint_floor_rps is not None:
            console.print(hint_floor_line(m.name, m.forecast, m.hint_floor_rps, m.pause),
                          markup=False, highlight=False, soft_wrap=True)
        if m.forecast is not None and m.forecast.notes:
            console.print(forecast_notes_line(m.name, m.forecast), markup=False,
                          highlight=False, soft_wrap=True)
    if status.accuracy:
        scored = _table("Forecasts over the last hour (each first step against the load then "
                        "seen)", "model", "steps", "WAPE", "p90 coverage")
        for a in status.accuracy:
            scored.add_row(escape(a.model), str(a.scored),
                           "-" if a.wape is None else f"{a.wape:.1%}", f"{a.p90_coverage:.0%}")
        console.print(_fitted(scored))
    title = "Pools" if not status.pools else f"Pools ({bill_text(fleet_bill(status.pools))})"
    pools = _table(title, "pool", "product", "ready", "pending", "target", "$/GPU-h")
    for p in status.pools:
        pools.add_row(escape(p.pool.name), escape(p.pool.product), str(p.pool.nodes_ready),
                      str(p.pool.nodes_pending), str(p.pool.target_nodes),
                      _num(p.price_per_gpu_hour, "{:,.2f}"))
    console.print(_fitted(pools))
    corrected = [c for c in status.profiles if c.is_corrected]
    if corrected:
        profiles = _table("Profiles corrected online (throughput per replica at the SLO)",
                          "model", "offline", "corrected", "factor", "reason")
        for c in corrected:
            profiles.add_row(escape(c.model), _num(c.offline_rps, "{:,.2f}"),
                             _num(c.corrected_rps, "{:,.2f}"), f"{c.factor:.3f}x",
                             escape(c.reason))
        console.print(_fitted(profiles))
    if status.hints:
        hints = _table("Demand hints (floors on the forecast; headroom hint)", *HINT_COLUMNS)
        listed = listed_models(status)
        for h in status.hints:
            hints.add_row(*hint_cells(h, h.model in listed))
        console.print(_fitted(hints))
    _render_plan(console, status, now)
    unmeasured = load_unmeasured_line(status)
    if unmeasured is not None:
        console.print(unmeasured, markup=False, highlight=False, soft_wrap=True)
    _render_verdict(console, health)


def bill_text(bill: FleetBill) -> str:
    """What the pools bill: ``billed: 24 GPUs, $102.40/h`` (and the pools with no price)."""
    unpriced = f"; no price for pool(s) {', '.join(bill.unpriced)}" if bill.unpriced else ""
    return f"billed: {bill.gpus} GPUs, ${bill.usd_per_hour:,.2f}/h{unpriced}"


def _render_plan(console: Console, status: FleetStatus, now: datetime) -> None:
    plan = status.plan
    if plan is None:
        console.print("no plan recorded")
    else:
        kind = "dry run" if plan.dry_run else "applied"
        kept = f" + {plan.kept_gpus:,.4g} kept beyond the placement" if plan.kept else ""
        summary = (f"{kind}, revision {plan.revision}: {plan.gpus_placed} GPUs placed + "
                   f"{plan.warm_gpus} warm{kept} = ${plan.cost_per_hour:,.2f}/h")
        actions = _table(f"Plan #{plan.plan_id} of tick #{plan.tick_id} ({summary})", "action",
                         "target", "from", "to", "reason", "outcome")
        for a in plan.actions:
            outcome = "-" if a.ok is None else ("ok" if a.ok else f"failed: {a.message}")
            actions.add_row(escape(a.kind), escape(a.target), str(a.from_value), str(a.to_value),
                            escape(a.reason), escape(outcome))
        console.print(_fitted(actions) if plan.actions else f"plan #{plan.plan_id} of tick "
                      f"#{plan.tick_id}: no actions ({summary})")
        if plan.held:
            held = _table("Held back by guards", "target", "kept", "wanted", "reason")
            for h in plan.held:
                held.add_row(escape(h.target), str(h.kept), str(h.wanted), escape(h.reason))
            console.print(_fitted(held))
        if plan.unplaced:
            console.print(f"unplaced: {escape(', '.join(plan.unplaced))}")
    if status.relayouts:
        relayouts = _table("MIG re-layouts in flight", "node", "layout", "phase", "started",
                           "waiting for")
        for r in status.relayouts:
            relayouts.add_row(escape(r.node), escape(f"{r.from_config} -> {r.to_config}"),
                              escape(r.phase), _ago(age_s(r.started_at, now)),
                              escape(r.alert or r.wait_reason))
        console.print(_fitted(relayouts))


def _render_verdict(console: Console, health: Health) -> None:
    if health.healthy:
        console.print("healthy")
    else:
        console.print("unhealthy: " + escape("; ".join(p.message for p in health.problems)),
                      soft_wrap=True)
