"""``headroom placement bindings | release``: the workloads bound through the placement API, read
from and released in the store's placement journal. A serving layer that dies without calling
Release leaves its binding, and with the journal the binding outlives every server restart; an
operator finds it here (by node and age) and releases it, and every placement server on the
store applies the release within its follow interval (0.5 s)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from controlplane.adapters.clock import WallClock
from controlplane.cli.json_errors import JsonOption, write_document
from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.domain.timestamps import utc_text
from forecaster.errors import InputError
from scheduler.domain.model import Binding

if TYPE_CHECKING:  # imported where used: `headroom placement --help` loads no store or gRPC
    from controlplane.store import Store
    from protos.headroom.v1 import placement_pb2 as pb

out = Console()
NodeOption = Annotated[str | None, typer.Option("--node", help="only the bindings on this node")]


def _cells(binding: Binding) -> tuple[str, str, str, str, str, str]:
    """One binding as the cells of a Rich table row (ids and names escaped)."""
    mode = binding.mode.value if binding.mode is not None else "cpu only"
    share = binding.mig_profile or f"{binding.gpu_milli} milli"
    return (escape(binding.workload_id), escape(binding.node), escape(binding.model or "-"),
            ",".join(map(str, binding.gpu_indices)) or "-", mode, escape(share))


def _lease(binding: Binding, now: datetime) -> str:
    if not binding.leased:
        return "-"
    left_s = binding.lease_expires_at_s - now.timestamp()
    return f"{left_s:,.0f} s left" if left_s > 0 else "ran out"


def _expires_at(binding: Binding) -> str | None:
    if not binding.leased:
        return None
    return utc_text(datetime.fromtimestamp(binding.lease_expires_at_s, UTC))


def list_bindings(
    node: NodeOption = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="only the bindings of this model (as its Place named it)")] = None,
    json_out: JsonOption = False,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """The workloads bound through the placement API, by node, with model and age."""
    # a lease that "ran out" is released by the next placement server on the store to sweep
    # (every 0.5 s while one runs)
    from controlplane.store.placement_journal import live_bindings

    def work(store: Store) -> tuple[tuple[Binding, datetime], ...]:
        with store.engine.connect() as connection:
            return live_bindings(connection, node, model)

    bound = with_existing_store(config, db, work)
    now = WallClock().now()
    if json_out:
        write_document(json.dumps([{
            "workload_id": b.workload_id, "node": b.node, "model": b.model or None,
            "tenant": b.tenant or None, "gpu_indices": list(b.gpu_indices),
            "mode": b.mode.value if b.mode is not None else None,
            "mig_profile": b.mig_profile or None, "gpu_milli": b.gpu_milli,
            "bound_at": utc_text(at), "lease_s": b.lease_s or None,
            "lease_expires_at": _expires_at(b)} for b, at in bound], indent=1))
        return
    if not bound:
        out.print("no workload" + (f" of model {model}" if model else "") + " is bound"
                  + (f" on node {node}" if node else ""), markup=False)
        return
    table = Table()
    for column in ("workload", "node", "model", "GPUs", "mode", "share", "bound (UTC)", "age",
                   "lease"):
        table.add_column(column, overflow="fold")  # whole ids to release, not "serving…"
    for b, at in bound:
        age_h = (now - at).total_seconds() / 3600
        table.add_row(*_cells(b), f"{at:%Y-%m-%d %H:%M}", f"{age_h:,.1f} h", _lease(b, now))
    out.print(table)


def release(
    workloads: Annotated[list[str] | None, typer.Argument(
        metavar="WORKLOAD",
        help="workload ids to release (see placement bindings); if one is not bound, none is "
             "released")] = None,
    node: Annotated[str | None, typer.Option(
        "--node", help="release every binding on this node")] = None,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Release bindings a serving layer left behind: the named workloads, or all on --node."""
    wanted = list(workloads or [])
    if not wanted and node is None:
        raise typer.BadParameter("name workloads or --node", param_hint="WORKLOAD")
    from controlplane.placement_api import journaled_engine
    from controlplane.store.placement_journal import live_bindings
    from protos.headroom.v1 import placement_pb2 as pb

    def work(store: Store) -> tuple[list[Binding], list[pb.Binding]]:
        now_s = WallClock().now().timestamp()
        with store.engine.connect() as connection:
            ran_out = [b for b, _ in live_bindings(connection) if b.expired(now_s) and (
                b.workload_id in wanted or b.node == node)]
        engine = journaled_engine(store, WallClock())
        ended = {b.workload_id for b in ran_out}
        missing = [w for w in wanted if w not in ended and engine.binding(w) is None]
        if missing:
            raise InputError(f"not bound: {', '.join(missing)} (see `headroom placement "
                             "bindings`); nothing released")
        engine.expire_leases()  # every binding whose lease ran out, through the journal
        on_node = engine.list_bindings(pb.ListBindingsRequest(node=node)).bindings if node else []
        ids = [*wanted, *(b.workload_id for b in on_node if b.workload_id not in wanted)]
        released = [b for b in (engine.binding(w) for w in ids) if b is not None]
        for binding in released:
            engine.release(pb.ReleaseRequest(workload_id=binding.workload_id))
        return ran_out, released

    ran_out, released = with_existing_store(config, db, work)
    if not released and not ran_out:
        out.print(f"no workload is bound on node {node}; nothing released", markup=False)
    for r in ran_out:
        out.print(f"released {r.workload_id} ({_where(r.node, r.gpu_indices)}): its lease had "
                  "run out", markup=False)
    for b in released:
        out.print(f"released {b.workload_id} ({_where(b.node, b.gpu_indices)})", markup=False)


def _where(node: str, gpu_indices: Sequence[int]) -> str:
    return f"node {node}, GPUs {','.join(map(str, gpu_indices)) or '-'}"
