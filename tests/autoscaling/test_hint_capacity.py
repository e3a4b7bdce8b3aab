"""Whether the capacity the control plane knows holds a demand hint (pure): the replicas and GPUs
a hint needs, what the pools at max_nodes and the GPU budgets hold for its model alone, and the
binding limit named as the tick's cap names it; at a tick, which hints a cap kept below their
announced rate."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from controlplane.autoscaling.core import Budgets
from controlplane.autoscaling.hint_capacity import (
    HintCheck,
    KnownCapacity,
    capped_hints,
    hint_capacity,
    with_capped_reasons,
)
from controlplane.autoscaling.sizing import ModelRequest, ReplicaShape
from controlplane.domain.demand import Demand
from controlplane.domain.desired import PoolSpec
from controlplane.domain.pause import ModelPause
from controlplane.domain.profile import ProfileCorrection

CHAT = ReplicaShape("chat", "acme", "A100-80GB", 3 / 7, 40.0)  # 2 replicas to a GPU
A100 = PoolSpec("a100-80gb", "A100-80GB", 8, 0, 8, 5.12)  # 64 GPUs at max_nodes
L4 = PoolSpec("l4", "L4", 4, 1, 8, 0.8)  # its floor: one node of 4 GPUs


def test_a_hint_the_pool_holds_fits_and_says_nothing() -> None:
    found = hint_capacity("chat", 600.0, CHAT, 0.8, (A100, L4), Budgets())
    assert (found.replicas_needed, found.gpus_needed) == (19, 10)  # 600 / 0.8 / 40 = 18.75
    assert found.fits and found.warning() == ""
    assert (found.capacity_replicas, found.capacity_gpus, found.capacity_rps) == (128, 64, 4096.0)


def test_a_hint_over_the_pools_max_nodes_names_the_pool_and_the_numbers() -> None:
    found = hint_capacity("chat", 20000.0, CHAT, 0.8, (A100, L4), Budgets())
    assert not found.fits
    assert (found.replicas_needed, found.gpus_needed, found.limit) == (
        625, 313, "pool_max_nodes:a100-80gb")
    assert found.warning() == (
        "chat at 20000 rps needs 625 replicas on 313 A100-80GB GPUs, but "
        "pool_max_nodes:a100-80gb holds at most 128 replicas on 64 GPUs (4096 rps); the hint "
        "is stored and the loop will scale the model as far as that allows")


def test_a_tenant_budget_below_the_pool_is_the_binding_limit() -> None:
    found = hint_capacity("chat", 2000.0, CHAT, 0.8, (A100, L4),
                          Budgets(tenant_gpus=(("acme", 10.5), ("globex", 1.0))))
    assert (found.limit, found.capacity_gpus, found.capacity_replicas, found.capacity_rps) == (
        "tenant_gpu_budget:acme", 10, 20, 640.0)


def test_a_cluster_budget_counts_whole_nodes_after_the_other_pools_floor() -> None:
    # 30 GPUs less the L4 pool's floor (1 node x 4) leave 26: three whole A100 nodes, 24 GPUs
    found = hint_capacity("chat", 2000.0, CHAT, 0.8, (A100, L4), Budgets(cluster_gpus=30))
    assert (found.limit, found.capacity_gpus, found.capacity_replicas) == (
        "cluster_gpu_budget", 24, 48)


def test_a_limit_equal_to_an_earlier_one_leaves_the_earlier_named_as_the_tick_names_it() -> None:
    found = hint_capacity("chat", 9000.0, CHAT, 0.8, (A100,),
                          Budgets(tenant_gpus=(("acme", 64.0),), cluster_gpus=64))
    assert found.limit == "tenant_gpu_budget:acme"  # the tick clamps the tenant budget first


def test_a_replica_of_two_gpus_fits_only_whole_on_a_node() -> None:
    big = ReplicaShape("big", "initech", "H100-80GB", 2, 12.0)
    odd = PoolSpec("h100", "H100-80GB", 3, 0, 4, 6.88)  # one 2-GPU replica per 3-GPU node
    found = hint_capacity("big", 100.0, big, 1.0, (odd,), Budgets())
    assert (found.replicas_needed, found.gpus_needed) == (9, 18)
    assert (found.capacity_replicas, found.capacity_gpus, found.limit) == (
        4, 8, "pool_max_nodes:h100")


def test_a_model_whose_product_no_pool_runs_can_hold_nothing() -> None:
    found = hint_capacity("chat", 10.0, CHAT, 0.8, (L4,), Budgets())
    assert (found.fits, found.capacity_replicas, found.limit) == (False, 0, "no_pool:A100-80GB")


def test_a_target_utilization_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="target_utilization"):
        hint_capacity("chat", 10.0, CHAT, 0.0, (A100,), Budgets())


#: ten A100s of acme's budget: 20 chat replicas (40 rps offline, 2 to a GPU)
ACME_10 = KnownCapacity((A100,), Budgets(tenant_gpus=(("acme", 10.0),)), 0.8)
#: what the last tick recorded for chat: corrected to 0.6 x its offline 40 rps
CHAT_AT_24 = ProfileCorrection("chat", 40.0, 24.0, 0.6, 31, "over_slo: 31 of 120 samples")


def test_a_hint_is_counted_on_the_profile_the_last_tick_corrected_and_the_warning_says_so(
        ) -> None:
    found = ACME_10.check("chat", 600.0, CHAT, CHAT_AT_24)
    # 600 / 0.8 / 24 = 31.25: 32 replicas; offline, 600 / 0.8 / 40 = 18.75: 19, which fit
    assert (found.fits, found.replicas_needed, found.capacity_replicas) == (False, 32, 20)
    assert found.capacity_rps == 20 * 24.0 * 0.8  # 384 rps, not the offline 640
    assert found.warning() == (
        "chat at 600 rps needs 32 replicas on 16 A100-80GB GPUs, but tenant_gpu_budget:acme "
        "holds at most 20 replicas on 10 GPUs (384 rps at 24 rps per replica: the profile the "
        "last tick corrected online, 0.6x the offline 40); the hint is stored and the loop "
        "will scale the model as far as that allows")


def test_a_hint_is_counted_offline_when_no_correction_is_recorded_or_correction_is_off(
        ) -> None:
    for known, recorded, why in (
            (ACME_10, None, "no tick has recorded a correction of it"),
            (ACME_10, ProfileCorrection("chat", 40.0, 40.0, 1.0, 0, "too_few_samples"),
             "no tick has recorded a correction of it"),
            (replace(ACME_10, corrects_profiles=False), CHAT_AT_24,
             "autoscaling.profile_correction is off")):
        found = known.check("chat", 700.0, CHAT, recorded)
        assert (found.replicas_needed, found.capacity_rps) == (22, 640.0)  # 700 / 0.8 / 40
        assert found.profile == f"40 rps per replica: the offline profile, {why}"
        assert found.warning().endswith(f"(640 rps at 40 rps per replica: the offline profile, "
                                        f"{why}); the hint is stored and the loop will scale "
                                        "the model as far as that allows")


def test_a_hint_on_a_paused_model_warns_that_the_pause_holds_whatever_the_capacity() -> None:
    pause = ModelPause("chat", 3, datetime(2026, 12, 3, 9, tzinfo=UTC), "ops")
    held = ACME_10.check("chat", 100.0, CHAT)
    assert HintCheck(held).warnings() == ()
    assert HintCheck(held, pause).warnings() == (
        "chat is paused since 2026-12-03T09:00:00Z by ops, held at 3 replica(s): the pause "
        "holds until `headroom models resume chat`; the loop sizes the model for the hint only "
        "then",)
    assert HintCheck(None, replace(pause, replicas=None)).warnings()[0].startswith(
        "chat is paused since 2026-12-03T09:00:00Z by ops, held at its current replicas: ")


def _demand(model: str, reason: str) -> Demand:
    return Demand(model, 25000.0, 100.0, 120.0, reason)


def test_a_hinted_demand_a_pool_cut_below_the_hint_is_capped_with_served_of_announced() -> None:
    demands = (_demand("chat", "forecast_upper_quantile+demand_hint"),
               _demand("other", "forecast_p90"))
    cuts = (("chat", "pool_max_nodes:a100-80gb"), ("other", "pool_max_nodes:a100-80gb"))
    found = capped_hints(demands, (ModelRequest("chat", 124), ModelRequest("other", 3)), cuts,
                         {"chat": 20000.0}, {"chat": 40.0, "other": 10.0}, 0.8)
    assert [(c.model, c.served_rps, c.announced_rps, c.replicas) for c in found] == [
        ("chat", 3968.0, 20000.0, 124)]
    assert found[0].reason() == "pool_max_nodes:a100-80gb+demand_hint_capped:3968/20000rps"
    assert found[0].note() == ("demand hint on chat: 20000 rps announced, 124 replicas sized "
                               "for 3968 rps: capped by pool_max_nodes:a100-80gb")
    assert with_capped_reasons(cuts, found) == (
        ("chat", "pool_max_nodes:a100-80gb+demand_hint_capped:3968/20000rps"),
        ("other", "pool_max_nodes:a100-80gb"))


def test_a_cut_that_still_holds_the_announced_rate_or_a_demand_no_hint_raised_is_no_cap() -> None:
    cuts = (("chat", "tenant_gpu_budget:acme"),)
    held = capped_hints((_demand("chat", "forecast_p90+demand_hint"),),
                        (ModelRequest("chat", 30),), cuts, {"chat": 900.0}, {"chat": 40.0}, 0.75)
    assert held == ()  # 30 x 40 x 0.75 = 900 rps: the cut took the tail above the hint
    untagged = capped_hints((_demand("chat", "forecast_p90"),), (ModelRequest("chat", 3),), cuts,
                            {"chat": 900.0}, {"chat": 40.0}, 0.75)
    assert untagged == ()
    uncut = capped_hints((_demand("chat", "forecast_p90+demand_hint"),),
                         (ModelRequest("chat", 3),), (), {"chat": 900.0}, {"chat": 40.0}, 0.75)
    assert uncut == ()


def test_a_warning_writes_a_rate_of_a_million_in_digits_not_an_exponent() -> None:
    found = hint_capacity("chat", 1_000_000.0, CHAT, 0.8, (A100, L4), Budgets())
    assert found.warning().startswith("chat at 1000000 rps needs 31250 replicas on 15625 ")
