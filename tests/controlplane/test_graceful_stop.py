"""Which model workloads may drop requests when a scale-down stops their pods."""

from __future__ import annotations

from dataclasses import replace

from controlplane.domain.graceful_stop import graceful_stop_findings
from controlplane.domain.observed import ObservedModel, ServingWorkload
from controlplane.sim.catalog import DEMO_MODELS

SPEC = replace(next(s for s in DEMO_MODELS if s.name == "llama-3-70b"), latency_slo_ms=40_000)
SPECS = {SPEC.name: SPEC}


def served_by(*workloads: ServingWorkload) -> ObservedModel:
    return ObservedModel(SPEC.name, 2, 0, 2, 10.0, capacity_rps=24.0, workloads=workloads)


def test_a_workload_with_a_pre_stop_hook_and_grace_past_the_slo_is_not_named() -> None:
    model = served_by(ServingWorkload("Deployment models/llm", (), 60.0, True))
    assert graceful_stop_findings([model], SPECS) == []


def test_a_workload_without_a_pre_stop_hook_is_named_with_what_to_add() -> None:
    model = served_by(ServingWorkload("Deployment models/llm", (), 60.0, False))
    assert graceful_stop_findings([model], SPECS) == [
        "model llama-3-70b: Deployment models/llm has no preStop hook, so its pods get SIGTERM "
        "while Services still send them requests (add one that waits ~5 s, e.g. "
        "lifecycle.preStop.sleep): a scale-down may drop requests in flight; reason "
        "ungraceful_stop"]


def test_a_grace_period_under_the_slo_plus_the_endpoints_delay_is_named() -> None:
    model = served_by(ServingWorkload("StatefulSet models/llm", (), 30.0, True),
                      ServingWorkload("Deployment models/llm-b", (), 45.0, True))
    assert graceful_stop_findings([model], SPECS) == [
        "model llama-3-70b: StatefulSet models/llm gives a stopping pod 30 s "
        "(terminationGracePeriodSeconds), under the 45 s its requests may need (40000 ms SLO "
        "+ 5 s for its endpoints to drop it): a scale-down may drop requests in flight; reason "
        "ungraceful_stop"]


def test_workloads_whose_stop_was_not_read_and_unknown_models_are_passed_over() -> None:
    unread = served_by(ServingWorkload("Deployment models/llm", ()))
    other = replace(served_by(ServingWorkload("Deployment models/x", (), 1.0, False)),
                    name="not-in-the-table")
    assert graceful_stop_findings([unread, other], SPECS) == []
