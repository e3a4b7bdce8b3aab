"""A crash before any durable step of a MIG relayout (a cluster write or a saved state) resumes,
in a new process with a new client and the same SQL store, to the right end state."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from apiserver import ApiServer
from fake_controllers import FakeMigManager, FakeReplicaController
from k8s_harness import START_AT, client_for
from relayout_scenario import FROM, TARGET, TO, relayout_actuator, seed

from controlplane.adapters.k8s.api import KubeApi
from controlplane.domain.mig_relayout import MigRelayout, RelayoutPhase
from controlplane.ports import RelayoutStore
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from controlplane.store.relayout import SqlRelayoutStore

T = TypeVar("T")


class SimulatedCrash(BaseException):
    """The process dies here (BaseException: no adapter may swallow it)."""


class Fuse:
    def __init__(self, blow_at: int | None) -> None:
        self.blow_at, self.count = blow_at, 0
        self.steps: list[str] = []

    def step(self, what: str) -> None:
        self.count += 1
        self.steps.append(what)
        if self.count == self.blow_at:
            raise SimulatedCrash(what)


class CrashingKubeApi(KubeApi):
    def __init__(self, fuse: Fuse, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fuse = fuse

    def _guard(self, what: str, write: Callable[[], T]) -> T:
        self.fuse.step(what)
        return write()

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._guard(f"apply {obj['kind']}", lambda: super(CrashingKubeApi, self).apply(obj))

    def merge_patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
                    namespace: str = "") -> dict[str, Any]:
        return self._guard(f"patch {kind} {sorted(patch)}", lambda: super(
            CrashingKubeApi, self).merge_patch(api_version, kind, name, patch, namespace))

    def evict(self, name: str, namespace: str) -> None:
        self._guard(f"evict {name}", lambda: super(CrashingKubeApi, self).evict(name, namespace))


class CrashingStore:
    def __init__(self, fuse: Fuse, inner: RelayoutStore) -> None:
        self.fuse, self.inner = fuse, inner

    def save_relayout(self, relayout: MigRelayout) -> None:
        self.fuse.step(f"save {relayout.phase.value}")
        self.inner.save_relayout(relayout)

    def active_relayouts(self) -> tuple[MigRelayout, ...]:
        return self.inner.active_relayouts()

    def relayouts_of(self, node: str) -> tuple[MigRelayout, ...]:
        return self.inner.relayouts_of(node)


def run_process(server: ApiServer, clock: VirtualClock, store: RelayoutStore, fuse: Fuse,
                controllers: list[Any], ticks: int = 20) -> bool:
    """One Headroom process: (re)issue the planned relayout, then tick. False if it crashed."""
    api = CrashingKubeApi(fuse, client_for(server), "headroom")
    actuator = relayout_actuator(server, clock, CrashingStore(fuse, store), api=api)
    try:
        actuator.start_relayout("a100-1", TARGET, "placement_wants_3g")
        for _ in range(ticks):
            clock.advance(30)
            actuator.advance()
            for controller in controllers:
                controller.react()
            if not store.active_relayouts():
                return True
    except SimulatedCrash:
        return False
    return True


def scenario(tmp_path: Path, name: str, mig_outcome: str = "success") -> tuple[
        ApiServer, VirtualClock, RelayoutStore, list[Any]]:
    server = ApiServer().start()
    seed(server)
    store = SqlRelayoutStore(Store.open(f"sqlite:///{tmp_path / name}.db", migrate=True).engine)
    clock = VirtualClock(START_AT)
    return server, clock, store, [FakeMigManager(server, {TO: mig_outcome}, clock=clock),
                                  FakeReplicaController(server, "m", 3)]


def durable_steps(tmp_path: Path, mig_outcome: str = "success") -> list[str]:
    server, clock, store, controllers = scenario(tmp_path, "reference", mig_outcome)
    fuse = Fuse(None)
    try:
        assert run_process(server, clock, store, fuse, controllers)
    finally:
        server.stop()
    return list(fuse.steps)


def test_the_reference_run_has_a_durable_step_in_every_phase(tmp_path: Path) -> None:
    steps = durable_steps(tmp_path)
    for phase in ("surge", "cordon", "drain", "relabel", "await_mig", "done"):
        assert any(step.startswith("save") and step.endswith(phase) for step in steps), phase
    assert "evict m-0" in steps and "evict m-1" in steps and "apply ConfigMap" in steps
    assert len(steps) == REFERENCE_STEPS, steps


# 12 saves (surge, cordon x2, drain x3, relabel x2: waiting for the config to propagate, then
# labelled; await_mig x3, done) and 7 cluster writes (ConfigMap, then cordon; evict m-0, m-1
# refused by the budget, m-1 again; label; uncordon).
REFERENCE_STEPS = 19


@pytest.mark.parametrize("crash_at", range(1, REFERENCE_STEPS + 1),
                         ids=lambda k: f"crash-before-step-{k}")
def test_a_crash_before_any_durable_step_resumes_to_the_new_layout(tmp_path: Path,
                                                                   crash_at: int) -> None:
    server, clock, store, controllers = scenario(tmp_path, f"crash{crash_at}")
    try:
        first = Fuse(crash_at)
        assert not run_process(server, clock, store, first, controllers)
        assert run_process(server, clock, store, Fuse(None), controllers)  # the restart
        final = store.relayouts_of("a100-1")[-1]
        assert final.phase is RelayoutPhase.DONE and final.alert == ""
        node = server.get("v1", "Node", "a100-1")
        labels = node["metadata"]["labels"]
        assert (labels["nvidia.com/mig.config"], labels["nvidia.com/mig.config.state"]) == (
            TO, "success")
        assert not node["spec"].get("unschedulable")
        assert controllers[0].violations == []
        pods = {p["metadata"]["name"] for p in server.list("v1", "Pod", "models")}
        assert {"m-0", "m-1"}.isdisjoint(pods) and len(pods) == 3
    finally:
        server.stop()


# The MIG manager fails the new layout: 16 saves (as above up to await_mig x3, then rollback,
# await_rollback x3, rolled_back) and 8 writes (as above, the label back, uncordon).
ROLLBACK_STEPS = 24


def test_the_rollback_run_passes_through_every_rollback_phase(tmp_path: Path) -> None:
    steps = durable_steps(tmp_path, "failed")
    for phase in ("rollback", "await_rollback", "rolled_back"):
        assert f"save {phase}" in steps, phase
    assert len(steps) == ROLLBACK_STEPS, steps


@pytest.mark.parametrize("crash_at", range(1, ROLLBACK_STEPS + 1),
                         ids=lambda k: f"crash-before-step-{k}")
def test_a_crash_during_a_failing_relayout_resumes_to_the_old_layout(tmp_path: Path,
                                                                     crash_at: int) -> None:
    server, clock, store, controllers = scenario(tmp_path, f"crash{crash_at}", "failed")
    try:
        assert not run_process(server, clock, store, Fuse(crash_at), controllers)
        assert run_process(server, clock, store, Fuse(None), controllers)
        final = store.relayouts_of("a100-1")[-1]
        assert final.phase is RelayoutPhase.ROLLED_BACK and final.alert == "mig_config_failed"
        node = server.get("v1", "Node", "a100-1")
        labels = node["metadata"]["labels"]
        assert (labels["nvidia.com/mig.config"], labels["nvidia.com/mig.config.state"]) == (
            FROM, "success")
        assert not node["spec"].get("unschedulable")
    finally:
        server.stop()
