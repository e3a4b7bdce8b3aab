"""K8sMigRelayoutActuator: runs the MIG relayout state machine (domain/mig_relayout.py) against
the cluster: each step reads the node, its pods and its pool, decides, runs the effects, then
persists the step. Only the leader should call ``advance``; see leader.py."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from controlplane.adapters.k8s import names as n
from controlplane.adapters.k8s.api import KubeApi, NotFoundError, PlannedWrite, ThrottledError
from controlplane.adapters.k8s.configmaps import ensure_mig_configs, mig_config_presence
from controlplane.adapters.k8s.fence import deadline_passed
from controlplane.adapters.k8s.inventory import Inventory, free_gpu_resources
from controlplane.adapters.k8s.node_pools import K8sNodePoolActuator
from controlplane.adapters.k8s.nodepool_pins import pin_problem
from controlplane.adapters.k8s.outcomes import failed
from controlplane.adapters.k8s.pool_targets import target_nodes, target_record
from controlplane.adapters.k8s.reader import K8sClusterReader, pods_drain_leaves
from controlplane.domain.actions import ActionOutcome
from controlplane.domain.desired import PoolSpec
from controlplane.domain.errors import PermanentError, TransientError
from controlplane.domain.mig_layout import NodeMigLayout, config_name, layout_problems
from controlplane.domain.mig_relayout import (
    MigRelayout,
    RelayoutPolicy,
    RelayoutView,
    active_surge_floors,
    orphaned,
    retry_refusal,
    same_config_refusal,
    start_relayout,
    step_relayout,
    with_blocked_evictions,
)
from controlplane.domain.models import SharingMode
from controlplane.domain.relayout_drain import NodeCapacity, PodOnNode, held_pods_refusal
from controlplane.domain.relayout_effects import (
    Effect,
    Evict,
    LabelMigConfig,
    ScalePool,
    SetUnschedulable,
    WriteMigConfig,
)
from controlplane.domain.relayout_gpu_pods import gpu_daemon_pods_refusal, gpu_pods_in_the_way
from controlplane.domain.sharing_config import layout_from_config_name
from controlplane.ports import Clock, RelayoutStore
from controlplane.settings import KubernetesSettings

log = logging.getLogger("headroom.k8s.mig")
MAX_STEPS_PER_ADVANCE = 12


def pods_to_drain(inventory: Inventory, node: str) -> tuple[PodOnNode, ...]:
    """The pods a drain of ``node`` must see gone: all but DaemonSet and static (mirror) pods."""
    return tuple(
        PodOnNode(p.namespace, p.name, tuple(sorted(p.gpu_requests.items())), p.managed,
                  p.do_not_disrupt)
        for p in inventory.pods_on(node) if not p.daemon and not p.mirror)


def relayout_view(inventory: Inventory, relayout: MigRelayout, pool: PoolSpec,
                  record: dict[str, Any] | None) -> RelayoutView:
    """What the relayout's next step looks at; ``record`` is the object holding the pool's
    committed size (pool_targets.target_record: its NodePool, or its placeholders under Cluster
    Autoscaler)."""
    node = inventory.node(relayout.node)
    if node is None:
        return RelayoutView(False, False, "", "", (), (), 0, pool.gpus_per_node)
    pods = pods_to_drain(inventory, node.name)
    others = tuple(
        NodeCapacity(o.name, o.ready and not o.unschedulable,
                     tuple(sorted(free_gpu_resources(o, inventory.pods_on(o.name)).items())))
        for o in inventory.nodes if o.pool == relayout.pool and o.name != node.name)
    registered = sum(1 for o in inventory.nodes if o.pool == relayout.pool)
    target = target_nodes(pool, record, registered)
    mine = node.labels.get(n.RELAYOUT_CORDON_LABEL) == n.label_value(relayout.relayout_id)
    return RelayoutView(True, node.unschedulable, node.mig_config, node.mig_state, pods, others,
                        target, pool.gpus_per_node, mine)


def surge_floors(store: RelayoutStore) -> Mapping[str, int]:
    """Pool size floors held by active relayouts (their surge capacity)."""
    return active_surge_floors(store.active_relayouts())


class K8sMigRelayoutActuator:
    def __init__(self, api: KubeApi, settings: KubernetesSettings, pools: Sequence[PoolSpec],
                 reader: K8sClusterReader, node_pools: K8sNodePoolActuator,
                 store: RelayoutStore, clock: Clock, policy: RelayoutPolicy) -> None:
        self.api = api
        self.settings = settings
        self.pools = {p.name: p for p in pools}
        self.reader = reader
        self.node_pools = node_pools
        self.store = store
        self.clock = clock
        self.policy = policy

    def surge_floors(self) -> Mapping[str, int]:
        return surge_floors(self.store)

    # -- start -------------------------------------------------------------------------------
    def start_relayout(self, node: str, layout: NodeMigLayout, reason: str) -> ActionOutcome:
        problems = layout_problems(layout)
        if problems:
            return failed(node, "; ".join(problems))
        try:
            return self._start(node, layout, reason)
        except TransientError as error:
            return failed(node, str(error), retryable=True)
        except PermanentError as error:  # 403/401 reading the node: this action fails, the
            return failed(node, str(error))  # plan's other actions still apply

    def _start(self, node: str, layout: NodeMigLayout, reason: str) -> ActionOutcome:
        inventory = self.reader.inventory()
        info = inventory.node(node)
        if info is None or not info.pool:
            return failed(node, f"unknown node {node} (or not in a configured pool)")
        target = config_name(layout)
        pool = self.pools.get(info.pool)
        nodepool = self.node_pools.nodepool_name(info.pool)
        unpinned = pin_problem(pool, nodepool, inventory.nodepools.get(nodepool)) if (
            pool is not None and layout.is_mig_enabled()) else ""
        if unpinned:  # a geometry for one product, on a node that may be another
            return failed(node, f"node {node}: {unpinned}")
        active = self.store.active_relayouts()
        mine = next((r for r in active if r.node == node), None)
        if mine is not None:
            if mine.to_config == target:
                return ActionOutcome(node, True, f"relayout to {target} in progress ({mine.phase})")
            return failed(node, f"relayout_in_progress: {mine.to_config} ({mine.phase})", True)
        if any(r.pool == info.pool for r in active):
            return failed(node, f"pool_relayout_in_progress: one node of {info.pool} at a time",
                          retryable=True)
        if info.mig_config == target and info.mig_state == "success":
            return ActionOutcome(node, True, f"node {node} already at {target}")
        if info.mig_state in ("pending", "rebooting"):
            return failed(node, f"mig_change_in_progress: {info.mig_config} is {info.mig_state}",
                          retryable=True)
        unapplied = same_config_refusal(node, info.mig_config, info.mig_state, target)
        if unapplied:  # only a person (or another layout) can move the MIG manager again
            return failed(node, unapplied)
        if info.unschedulable:  # an operator's, or a failed relayout's left for one
            return failed(node, f"node_cordoned: node {node} is cordoned (an operator's cordon "
                          "means leave it alone); not re-laid out", retryable=True)
        held = held_pods_refusal(node, pods_to_drain(inventory, node))
        if held:  # its drain would delete a pod nothing recreates, or disrupt one that asks
            return failed(node, held, retryable=True)  # not to be: someone must act first
        in_the_way = gpu_daemon_pods_refusal(node, gpu_pods_in_the_way(
            pods_drain_leaves(inventory, node), self.settings.gpu_operator_namespace))
        if in_the_way:  # no drain removes it and the MIG manager does not stop it: refused
            return failed(node, in_the_way, retryable=True)  # before the cordon, not after
        backoff = retry_refusal(self.store.relayouts_of(node), target, self.clock.now(),
                                self.policy)
        if backoff:
            return failed(node, backoff, retryable=True)
        if info.labels.get(n.SHARING_STRATEGY) == "mps":
            name = info.labels.get(n.DEVICE_PLUGIN_CONFIG, "")
            selected = layout_from_config_name(name)
            if selected is not None and selected.mode is not SharingMode.MPS:
                # the sharing change the plan puts first was written; GFD relabels the node
                # once the device plugin has left MPS
                return failed(node, f"mps_still_running: node {node} selects "
                              f"{n.DEVICE_PLUGIN_CONFIG}={name} but "
                              f"{n.SHARING_STRATEGY} is still mps; waiting for the device "
                              "plugin", retryable=True)
            return failed(node, f"node {node} shares GPUs with MPS; set it exclusive first")
        relayout = start_relayout(node, info.pool, info.mig_config or "all-disabled", target,
                                  layout, self.clock.now(), self.policy, reason)
        if self.api.dry_run:
            self.api.note(PlannedWrite("relayout", "v1", "Node", node, "",
                                          {"from": relayout.from_config, "to": target}))
            return ActionOutcome(node, True, f"dry run: would re-lay out {node} to {target}")
        self.store.save_relayout(relayout)
        log.info("relayout.started", extra={"node": node, "to": target, "reason": reason})
        return ActionOutcome(node, True, f"relayout of {node} to {target} started")

    def in_flight(self) -> dict[str, NodeMigLayout]:
        return {r.node: r.to_layout for r in self.store.active_relayouts()}

    # -- advance -----------------------------------------------------------------------------
    def advance(self) -> tuple[MigRelayout, ...]:
        if self.api.dry_run:
            return self.store.active_relayouts()
        return tuple(self._advance_one(r) for r in self.store.active_relayouts())

    def _advance_one(self, relayout: MigRelayout) -> MigRelayout:
        pool = self.pools.get(relayout.pool)
        if pool is None:
            failed_now = orphaned(relayout, self.clock.now(), self.policy)
            self.store.save_relayout(failed_now)
            log.warning("relayout.alert", extra={"node": relayout.node, "phase": "failed",
                                                 "alert": failed_now.alert})
            return failed_now
        for _ in range(MAX_STEPS_PER_ADVANCE):
            try:
                view = self._view(relayout, pool)
            except (TransientError, PermanentError) as error:  # 5xx, unreachable, 403: wait
                log.warning("relayout.observe_failed", extra={"node": relayout.node,
                                                              "error": str(error)})
                return self._waiting(relayout, f"observe_failed: {error}")
            step = step_relayout(relayout, view, self.clock.now(), self.policy)
            try:
                blocked = self._run(step.effects, relayout)
            except (TransientError, PermanentError) as error:
                return self._waiting(relayout, f"effect_failed: {error}")
            following = with_blocked_evictions(step.relayout, blocked)
            self.store.save_relayout(following)
            if following.phase == relayout.phase or not following.is_active:
                if following.alert and not following.is_active:
                    log.warning("relayout.alert", extra={"node": following.node,
                                                         "phase": following.phase.value,
                                                         "alert": following.alert})
                if following.wait_reason.startswith("left_cordoned") and not following.is_active:
                    log.info("relayout.left_cordoned", extra={
                        "node": following.node, "reason": following.wait_reason})
                return following
            relayout = following
        return relayout

    def _view(self, relayout: MigRelayout, pool: PoolSpec) -> RelayoutView:
        inventory = self.reader.inventory()
        view = relayout_view(inventory, relayout, pool,
                             target_record(inventory, self.settings, pool))
        present, written = mig_config_presence(
            self.api, self.settings.mig_config_map, self.settings.gpu_operator_namespace,
            relayout.to_config, relayout.to_layout)
        undrained = gpu_pods_in_the_way(pods_drain_leaves(inventory, relayout.node),
                                        self.settings.gpu_operator_namespace)
        return replace(view, config_present=present, config_written_at=written,
                       undrained_gpu_pods=undrained)

    def _waiting(self, relayout: MigRelayout, reason: str) -> MigRelayout:
        """The relayout stays in its phase; the next advance retries the step. A replica whose
        leadership ended during the step (fence.py) leaves the stored relayout as it was: the
        next leader owns it."""
        waiting = replace(relayout, wait_reason=reason)
        if not deadline_passed():
            self.store.save_relayout(waiting)
        return waiting

    def _run(self, effects: Sequence[Effect], relayout: MigRelayout) -> tuple[str, ...]:
        blocked: list[str] = []
        for effect in effects:
            if isinstance(effect, ScalePool):
                outcome = self.node_pools.set_size(effect.pool, effect.nodes)
                if not outcome.ok:
                    raise TransientError(outcome.message)
            elif isinstance(effect, SetUnschedulable):  # one patch: cordon and marker together
                mark = n.label_value(relayout.relayout_id) if effect.unschedulable else None
                self.api.merge_patch("v1", "Node", effect.node, {
                    "metadata": {"labels": {n.RELAYOUT_CORDON_LABEL: mark}},
                    "spec": {"unschedulable": True if effect.unschedulable else None}})
            elif isinstance(effect, Evict):
                try:
                    self.api.evict(effect.name, effect.namespace)
                except ThrottledError:
                    blocked.append(f"{effect.namespace}/{effect.name}")
                except NotFoundError:
                    continue
            elif isinstance(effect, WriteMigConfig):
                ensure_mig_configs(self.api, self.settings.mig_config_map,
                                   self.settings.gpu_operator_namespace, effect.name,
                                   effect.layout, relayout.from_config, self.clock.now())
            elif isinstance(effect, LabelMigConfig):
                self.api.merge_patch("v1", "Node", effect.node, {"metadata": {"labels": {
                    n.MIG_CONFIG: effect.config, n.MIG_CONFIG_STATE: None}}})
        return tuple(blocked)
