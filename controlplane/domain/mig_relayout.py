"""Safe MIG re-layout of one node as a persisted state machine (pure).

    surge -> cordon -> drain -> relabel -> await_mig -> done
             (writes the       (labels once  | failed / timeout
             target config)    the config    v
                               propagated) rollback -> await_rollback -> rolled_back   (alert)
                                                  | failed / timeout
                                                  v
                                                failed                      (alert, stays cordoned)

(A timeout before the label, of the surge, the drain or the config's propagation, ends aborted,
the relayout's own cordon undone.)

``step_relayout(relayout, view, now, policy)`` looks at what the cluster shows now and returns the
next relayout value plus the idempotent effects to run. The executor runs the effects, then
persists the value; a crash anywhere in between is harmless because every phase re-derives its
effects from the observed view (a cordoned node is not cordoned again, a node already labelled
is not relabelled, a config written again over itself changes nothing). Evictions only go
through the Eviction API: a disruption budget that says "not now" makes the relayout wait with a
recorded reason, never forces it.

What the drain moves, the surge that makes room for it, and the pods it never evicts
(unmanaged, or ``karpenter.sh/do-not-disrupt``): ``relayout_drain``.

Pods a drain leaves that hold GPUs (``RelayoutView.undrained_gpu_pods``, decided by
``relayout_gpu_pods.gpu_pods_in_the_way``): a DaemonSet's or static pod that requests GPUs and
is not the GPU Operator's, which the MIG manager does not stop and must not reconfigure under.
A relayout is not started on a node that runs one (``gpu_daemon_pods_refusal``, before any surge
or cordon: no capacity is cordoned away for a relayout that cannot finish); one that arrives
later (a DaemonSet's pod tolerates the cordon) holds the drain, evicting none, and the MIG label
(``gpu_daemon_pods: ...``) until it is gone; past the phase's deadline the relayout ends
aborted, its own cordon undone (``drain_timeout`` / ``relabel_timeout``), naming it.

Config propagation: the MIG manager reads its config file from a mounted ConfigMap volume, which
kubelet updates a minute or more after the ConfigMap changes, and it acts only when the node's
``nvidia.com/mig.config`` label changes, failing a config its file does not hold yet. So the
target config is written at the cordon (its propagation overlaps the drain), and the node is
labelled only once the ConfigMap has held it, unchanged, for ``config_propagation_s``
(``RelayoutView.config_written_at``: when Headroom last wrote it; None, a config written by
someone else or an older Headroom, counts as long present). Until then relabel waits
(``config_propagating: ...``), writing the config again if it is missing.

Cordons: a relayout undoes only its own cordon. Its cordon carries a marker (the adapter labels
the node with the relayout's id; ``RelayoutView.cordon_is_mine``), so a crash between cordoning
and saving still knows the cordon is its own. A node found cordoned without the marker when the
relayout comes to cordon it was cordoned by someone else first (``was_cordoned``, persisted):
the relayout goes on and leaves that cordon in place. At the end (done, rolled back, aborted
drain) the node is uncordoned only when its cordon carries the marker and it was not cordoned
before; otherwise it stays cordoned and ``wait_reason`` says why (``left_cordoned: ...``). A
``kubectl cordon`` of a node the relayout already cordoned writes nothing and cannot be seen:
an operator who wants that node kept cordoned removes the marker label. Starting a relayout on a
cordoned node is refused (the planner already skips cordoned nodes), and so is one to the config
the node is already labelled with but not at (``same_config_refusal``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from controlplane.domain.mig_layout import NodeMigLayout
from controlplane.domain.relayout_drain import (
    NodeCapacity,
    PodOnNode,
    capacity_shortfall,
    format_shortfall,
    held_pods,
    surge_nodes,
)
from controlplane.domain.relayout_effects import (
    Effect,
    Evict,
    LabelMigConfig,
    ScalePool,
    SetUnschedulable,
    WriteMigConfig,
)
from controlplane.domain.relayout_gpu_pods import gpu_daemon_pods


class RelayoutPhase(StrEnum):
    SURGE = "surge"
    CORDON = "cordon"
    DRAIN = "drain"
    RELABEL = "relabel"
    AWAIT_MIG = "await_mig"
    ROLLBACK = "rollback"
    AWAIT_ROLLBACK = "await_rollback"
    DONE = "done"
    ROLLED_BACK = "rolled_back"
    ABORTED = "aborted"
    FAILED = "failed"


TERMINAL = frozenset({RelayoutPhase.DONE, RelayoutPhase.ROLLED_BACK, RelayoutPhase.ABORTED,
                      RelayoutPhase.FAILED})


@dataclass(frozen=True, slots=True)
class RelayoutPolicy:
    surge_timeout_s: float = 900.0
    drain_timeout_s: float = 3600.0
    mig_timeout_s: float = 900.0
    retry_after_s: float = 3600.0  # a node's relayout that ended short of its target: the next
    # one to that target waits this long (else a blocked drain or a config the MIG manager fails
    # re-cordons and re-drains the node every time the last attempt gives up)
    config_propagation_s: float = 120.0  # a config Headroom wrote is labelled only this long
    # after (the MIG manager's mounted ConfigMap lags the API); 0: at once

    def timeout_s(self, phase: RelayoutPhase) -> float | None:
        return {RelayoutPhase.SURGE: self.surge_timeout_s,
                RelayoutPhase.DRAIN: self.drain_timeout_s,
                RelayoutPhase.RELABEL: self.config_propagation_s + self.mig_timeout_s,
                RelayoutPhase.AWAIT_MIG: self.mig_timeout_s,
                RelayoutPhase.AWAIT_ROLLBACK: self.mig_timeout_s}.get(phase)


@dataclass(frozen=True, slots=True)
class MigRelayout:
    relayout_id: str
    node: str
    pool: str
    from_config: str
    to_config: str
    to_layout: NodeMigLayout
    phase: RelayoutPhase
    started_at: datetime
    updated_at: datetime
    deadline_at: datetime | None = None
    surge_nodes: int = 0  # pool size floor while the relayout runs; 0 = no surge asked
    wait_reason: str = ""
    alert: str = ""
    reason: str = ""
    was_cordoned: bool = False  # someone else's cordon was on the node before the relayout's

    @property
    def is_active(self) -> bool:
        return self.phase not in TERMINAL


@dataclass(frozen=True, slots=True)
class RelayoutView:
    node_exists: bool
    cordoned: bool
    mig_config: str
    mig_state: str  # pending | rebooting | success | failed | "" (unset)
    pods: tuple[PodOnNode, ...]  # pods a drain must see gone (no DaemonSet or mirror pods)
    others: tuple[NodeCapacity, ...]  # the other nodes of the pool
    pool_target_nodes: int
    gpus_per_node: int
    cordon_is_mine: bool = False  # the node carries this relayout's cordon marker
    config_present: bool = False  # the MIG ConfigMap holds the target config as it is wanted
    config_written_at: datetime | None = None  # when Headroom last changed that config (None:
    # not recorded, e.g. an operator's or an older Headroom's: counts as long present)
    undrained_gpu_pods: tuple[str, ...] = ()  # pods a drain leaves that hold GPUs the MIG
    # manager does not free (relayout_gpu_pods.gpu_pods_in_the_way): namespace/name


@dataclass(frozen=True, slots=True)
class RelayoutStep:
    relayout: MigRelayout
    effects: tuple[Effect, ...] = ()


def start_relayout(node: str, pool: str, from_config: str, to_config: str,
                   to_layout: NodeMigLayout, now: datetime, policy: RelayoutPolicy,
                   reason: str) -> MigRelayout:
    first = MigRelayout(f"{node}@{now:%Y%m%dT%H%M%S}", node, pool, from_config, to_config,
                        to_layout, RelayoutPhase.SURGE, now, now, reason=reason)
    return _enter(first, RelayoutPhase.SURGE, now, policy)


def active_surge_floors(relayouts: Iterable[MigRelayout]) -> Mapping[str, int]:
    """Pool size floors held by the active ``relayouts`` (their surge capacity), by pool."""
    floors: dict[str, int] = {}
    for r in relayouts:
        if r.is_active and r.surge_nodes:
            floors[r.pool] = max(floors.get(r.pool, 0), r.surge_nodes)
    return floors


def retry_refusal(previous: Sequence[MigRelayout], to_config: str, now: datetime,
                  policy: RelayoutPolicy) -> str:
    """Why a new relayout to ``to_config`` must not start yet ("" when it may): the node's
    latest relayout went to the same config and ended short of it (aborted, rolled back or
    failed; a node that was gone is a new node) less than ``retry_after_s`` ago."""
    last = max(previous, key=lambda r: r.updated_at, default=None)
    if (last is None or last.is_active or last.phase is RelayoutPhase.DONE
            or last.to_config != to_config or last.alert == "node_gone"):
        return ""
    retry_at = last.updated_at + timedelta(seconds=policy.retry_after_s)
    if now >= retry_at:
        return ""
    return (f"relayout_backoff: the last relayout of {last.node} to {to_config} ended "
            f"{last.phase.value} ({last.alert or 'no alert'}) at {last.updated_at:%H:%M:%S}; "
            f"not retried before {retry_at:%Y-%m-%dT%H:%M:%S}")


def same_config_refusal(node: str, mig_config: str, mig_state: str, to_config: str) -> str:
    """Why a relayout of ``node`` to ``to_config`` must not start ("" when it may): the node is
    already labelled with that config but the MIG manager has not applied it (state failed or
    unset; pending and rebooting are a change still running). The relayout would never change
    the label, so the MIG manager would never run again: it would drain the node for nothing and
    end failed, the node left cordoned."""
    if mig_config != to_config or mig_state in ("success", "pending", "rebooting"):
        return ""
    return (f"mig_config_not_applied: node {node} is labelled nvidia.com/mig.config={mig_config} "
            f"with nvidia.com/mig.config.state={mig_state or 'unset'}; relabelling to the same "
            "config does not re-run the MIG manager: fix the node by hand or lay it out to "
            "another config")


def config_settled_at(view: RelayoutView, policy: RelayoutPolicy) -> datetime | None:
    """When the node may be labelled with the target config: once the ConfigMap has held it,
    unchanged, for ``config_propagation_s`` (None: it does not hold it as wanted; ``datetime.min``
    for a config whose write time is not recorded)."""
    if not view.config_present:
        return None
    if view.config_written_at is None:
        return datetime.min.replace(tzinfo=UTC)
    return view.config_written_at + timedelta(seconds=policy.config_propagation_s)


def orphaned(r: MigRelayout, now: datetime, policy: RelayoutPolicy) -> MigRelayout:
    """A relayout of a pool no longer in the settings: FAILED with the node left as it is
    (cordon and MIG labels), for an operator; active, it would hold a drain slot forever."""
    return _enter(r, RelayoutPhase.FAILED, now, policy, alert=(
        f"pool_unconfigured: pool {r.pool} is no longer in Headroom's settings; node {r.node} is "
        f"left as it was in phase {r.phase.value} (cordon and MIG labels): finish or undo the "
        "change by hand"))


def _enter(r: MigRelayout, phase: RelayoutPhase, now: datetime, policy: RelayoutPolicy,
           alert: str | None = None) -> MigRelayout:
    timeout_s = policy.timeout_s(phase)
    deadline = now + timedelta(seconds=timeout_s) if timeout_s is not None else None
    return replace(r, phase=phase, updated_at=now, deadline_at=deadline, wait_reason="",
                   alert=r.alert if alert is None else alert)


def _wait(r: MigRelayout, now: datetime, reason: str) -> MigRelayout:
    return replace(r, updated_at=now, wait_reason=reason)


def _expired(r: MigRelayout, now: datetime) -> bool:
    return r.deadline_at is not None and now >= r.deadline_at


def step_relayout(r: MigRelayout, view: RelayoutView, now: datetime,
                  policy: RelayoutPolicy) -> RelayoutStep:
    if not r.is_active:
        return RelayoutStep(r)
    if not view.node_exists:
        return RelayoutStep(_enter(r, RelayoutPhase.ABORTED, now, policy, alert="node_gone"))
    handler = _HANDLERS[r.phase]
    return handler(r, view, now, policy)


def _surge(r: MigRelayout, view: RelayoutView, now: datetime,
           policy: RelayoutPolicy) -> RelayoutStep:
    short = capacity_shortfall(view.pods, view.others)
    if not short:
        return RelayoutStep(_enter(r, RelayoutPhase.CORDON, now, policy))
    if _expired(r, now):
        return RelayoutStep(_enter(r, RelayoutPhase.ABORTED, now, policy,
                                   alert="surge_timeout: " + format_shortfall(short)))
    surge = r.surge_nodes or surge_nodes(short, view.pool_target_nodes, view.gpus_per_node)
    effects: tuple[Effect, ...] = ()
    if view.pool_target_nodes < surge:
        effects = (ScalePool(r.pool, surge),)
    waiting = replace(_wait(r, now, "surge_pending: short " + format_shortfall(short)),
                      surge_nodes=surge)
    return RelayoutStep(waiting, effects)


def _write_config(r: MigRelayout, view: RelayoutView) -> tuple[Effect, ...]:
    return () if view.config_present else (WriteMigConfig(r.to_config, r.to_layout),)


def _cordon(r: MigRelayout, view: RelayoutView, now: datetime,
            policy: RelayoutPolicy) -> RelayoutStep:
    """Cordon, and write the target config first: it propagates while the node drains."""
    write = _write_config(r, view)
    if view.cordoned:
        was_cordoned = r.was_cordoned or not view.cordon_is_mine
        return RelayoutStep(_enter(replace(r, was_cordoned=was_cordoned), RelayoutPhase.DRAIN,
                                   now, policy), write)
    return RelayoutStep(_wait(r, now, "cordoning"), (*write, SetUnschedulable(r.node, True)))


def _give_back(r: MigRelayout, view: RelayoutView, phase: RelayoutPhase, now: datetime,
               policy: RelayoutPolicy, alert: str | None = None) -> RelayoutStep:
    """End in ``phase``, undoing the relayout's own cordon (and its marker) only: a node
    cordoned before the relayout, or whose cordon lacks the marker, stays cordoned."""
    ended = _enter(r, phase, now, policy, alert=alert)
    if view.cordon_is_mine and not r.was_cordoned:
        return RelayoutStep(ended, (SetUnschedulable(r.node, False),))
    if not view.cordoned:
        return RelayoutStep(ended)
    why = (f"{r.node} was cordoned before the relayout; its cordon is not Headroom's"
           if r.was_cordoned else
           f"{r.node}'s cordon lacks this relayout's marker (someone else's)")
    return RelayoutStep(replace(ended, wait_reason="left_cordoned: " + why))


def _drain(r: MigRelayout, view: RelayoutView, now: datetime,
           policy: RelayoutPolicy) -> RelayoutStep:
    """Evict the node's pods; while one must not be evicted (``held_pods``: unmanaged, or
    do-not-disrupt) or a pod the drain leaves holds GPUs (``gpu_daemon_pods``) evict none (an
    abort would have moved the others for nothing) and wait naming it."""
    if not view.pods and not view.undrained_gpu_pods:
        return RelayoutStep(_enter(r, RelayoutPhase.RELABEL, now, policy))
    left = ", ".join((*(p.key for p in view.pods), *view.undrained_gpu_pods))
    held = "; ".join(why for why in (held_pods(view.pods),
                                     gpu_daemon_pods(view.undrained_gpu_pods)) if why)
    if _expired(r, now):
        also = f"; {held}" if held else ""
        return _give_back(r, view, RelayoutPhase.ABORTED, now, policy,
                          alert=f"drain_timeout: {left} still running{also}")
    if held:
        return RelayoutStep(_wait(r, now, held))
    evictions = tuple(Evict(p.namespace, p.name) for p in view.pods)
    return RelayoutStep(_wait(r, now, f"draining: {left}"), evictions)


def _relabel(r: MigRelayout, view: RelayoutView, now: datetime,
             policy: RelayoutPolicy) -> RelayoutStep:
    """Label the node once its config has propagated and no pod the drain left holds GPUs
    (``gpu_daemon_pods``: one that arrived after the drain); until then wait, (re)writing the
    config when the ConfigMap lacks it. A node already labelled (a crash after the label) goes
    on."""
    if view.mig_config == r.to_config:
        return RelayoutStep(_enter(r, RelayoutPhase.AWAIT_MIG, now, policy),
                            (WriteMigConfig(r.to_config, r.to_layout),))
    settled_at = config_settled_at(view, policy)
    in_the_way = gpu_daemon_pods(view.undrained_gpu_pods)
    if settled_at is not None and now >= settled_at and not in_the_way:
        return RelayoutStep(_enter(r, RelayoutPhase.AWAIT_MIG, now, policy),
                            (LabelMigConfig(r.node, r.to_config),))
    if in_the_way:
        why = in_the_way
    elif settled_at is None or view.config_written_at is None:
        why = f"config_propagating: {r.to_config} not yet in the ConfigMap as wanted"
    else:
        why = (f"config_propagating: {r.to_config} written at "
               f"{view.config_written_at:%H:%M:%S}, labelled after {settled_at:%H:%M:%S}")
    if _expired(r, now):
        alert = (f"relabel_timeout: {why}" if in_the_way else
                 why.replace("config_propagating", "config_propagation_timeout", 1))
        return _give_back(r, view, RelayoutPhase.ABORTED, now, policy, alert=alert)
    return RelayoutStep(_wait(r, now, why), _write_config(r, view))


def _await_mig(r: MigRelayout, view: RelayoutView, now: datetime,
               policy: RelayoutPolicy) -> RelayoutStep:
    if view.mig_config != r.to_config:
        return RelayoutStep(_enter(r, RelayoutPhase.FAILED, now, policy,
                                   alert=f"mig_label_changed: {view.mig_config!r}"))
    if view.mig_state == "success":
        return _give_back(r, view, RelayoutPhase.DONE, now, policy)
    if view.mig_state == "failed" or _expired(r, now):
        cause = "mig_config_failed" if view.mig_state == "failed" else "mig_config_timeout"
        return RelayoutStep(_enter(r, RelayoutPhase.ROLLBACK, now, policy, alert=cause))
    return RelayoutStep(_wait(r, now, f"awaiting_mig_manager: state={view.mig_state or 'unset'}"))


def _rollback(r: MigRelayout, view: RelayoutView, now: datetime,
              policy: RelayoutPolicy) -> RelayoutStep:
    effects = (LabelMigConfig(r.node, r.from_config),) if view.mig_config != r.from_config else ()
    return RelayoutStep(_enter(r, RelayoutPhase.AWAIT_ROLLBACK, now, policy, alert=r.alert),
                        effects)


def _await_rollback(r: MigRelayout, view: RelayoutView, now: datetime,
                    policy: RelayoutPolicy) -> RelayoutStep:
    if view.mig_config == r.from_config and view.mig_state == "success":
        return _give_back(r, view, RelayoutPhase.ROLLED_BACK, now, policy, alert=r.alert)
    if view.mig_state == "failed" or _expired(r, now) or view.mig_config != r.from_config:
        return RelayoutStep(_enter(r, RelayoutPhase.FAILED, now, policy,
                                   alert=f"{r.alert}; rollback_failed"))
    return RelayoutStep(_wait(r, now, f"awaiting_rollback: state={view.mig_state or 'unset'}"))


_HANDLERS = {
    RelayoutPhase.SURGE: _surge, RelayoutPhase.CORDON: _cordon, RelayoutPhase.DRAIN: _drain,
    RelayoutPhase.RELABEL: _relabel, RelayoutPhase.AWAIT_MIG: _await_mig,
    RelayoutPhase.ROLLBACK: _rollback, RelayoutPhase.AWAIT_ROLLBACK: _await_rollback,
}


def with_blocked_evictions(r: MigRelayout, blocked: tuple[str, ...]) -> MigRelayout:
    """Record why a drain waits: the pods whose eviction a disruption budget refused (429)."""
    if not blocked:
        return r
    return replace(r, wait_reason="eviction_blocked_by_pdb: " + ", ".join(blocked))

