"""Whether a model's pods stop without dropping requests when Headroom scales it down (pure).

A scale-down deletes pods. Kubernetes then sends SIGTERM at once and, in parallel, removes the
pod from its Service's endpoints, which every node's proxy and every load balancer learns a few
seconds later: a server that stops accepting on SIGTERM refuses the requests still routed to it,
unless a ``preStop`` hook (e.g. ``sleep: {seconds: 5}``) delays the SIGTERM until they no longer
are. Then the server finishes its requests in flight, Triton and vLLM both do, but only for
``terminationGracePeriodSeconds`` (30 s unless set) from the deletion, preStop included; a
request still running after that is killed with its pod. A model's request may take up to its
latency SLO, so the grace must cover the SLO plus the hook (LANDSCAPE.md gap 12).

``graceful_stop_findings`` names each model workload that falls short, on every tick until it is
fixed, as ``workload_slices`` does: the workloads are the user's, Headroom only reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controlplane.domain.models import ModelSpec
from controlplane.domain.observed import ObservedModel

UNGRACEFUL_STOP = "ungraceful_stop"
ENDPOINTS_PROPAGATION_S = 5.0  # what a preStop sleep should cover: endpoints dropping the pod


def graceful_stop_findings(models: Sequence[ObservedModel],
                           specs: Mapping[str, ModelSpec]) -> list[str]:
    """One line per model workload whose pods may drop or kill requests when they stop: no
    preStop hook, or a grace period under the model's SLO plus ``ENDPOINTS_PROPAGATION_S``.
    Workloads whose stop settings were not read (the simulator's) are passed over."""
    found = []
    for model in models:
        spec = specs.get(model.name)
        if spec is None:
            continue
        needed_s = spec.latency_slo_ms / 1000 + ENDPOINTS_PROPAGATION_S
        for workload in model.workloads:
            if workload.stop_grace_s is None or workload.pre_stop is None:
                continue
            problems = []
            if not workload.pre_stop:
                problems.append(
                    "has no preStop hook, so its pods get SIGTERM while Services still send "
                    f"them requests (add one that waits ~{ENDPOINTS_PROPAGATION_S:.0f} s, e.g. "
                    "lifecycle.preStop.sleep)")
            if workload.stop_grace_s < needed_s:
                problems.append(
                    f"gives a stopping pod {workload.stop_grace_s:g} s "
                    f"(terminationGracePeriodSeconds), under the {needed_s:g} s its requests "
                    f"may need ({spec.latency_slo_ms:g} ms SLO + "
                    f"{ENDPOINTS_PROPAGATION_S:.0f} s for its endpoints to drop it)")
            if problems:
                found.append(f"model {model.name}: {workload.name} " + " and ".join(problems)
                             + f": a scale-down may drop requests in flight; reason "
                             f"{UNGRACEFUL_STOP}")
    return found
