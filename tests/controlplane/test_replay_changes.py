"""``trace replay``'s changes and inputs: each ``--set`` change a key simulate honours with a
YAML value, set into a copy of serve's settings file; ``--sweep``'s replays, a value each; the
demo fleet's start times as quantiles."""

from __future__ import annotations

import math

import pytest

from controlplane.replay_changes import (
    parse_changes,
    parse_sweep,
    value_at,
    variants,
    with_changes,
)
from controlplane.replay_inputs import replay_settings, uniform_sum_quantiles
from controlplane.settings import load_settings
from forecaster.errors import InputError


def test_values_are_read_as_yaml_so_numbers_flags_and_mappings_keep_their_types() -> None:
    changes = parse_changes(["autoscaling.keep_s = 600", "reconcile.stale_headroom=1.5",
                             "autoscaling.tenant_gpu_budgets={acme: 8, globex: 4}",
                             "autoscaling.profile_correction={enabled: true}"])
    assert changes == {"autoscaling.keep_s": 600, "reconcile.stale_headroom": 1.5,
                       "autoscaling.tenant_gpu_budgets": {"acme": 8, "globex": 4},
                       "autoscaling.profile_correction": {"enabled": True}}


def test_changes_land_in_a_copy_and_serves_file_keeps_its_values() -> None:
    serve = replay_settings(load_settings())
    changed = with_changes(serve, {"safety.max_node_step": 9,
                                   "pools": [{"name": "l4", "product": "L4", "gpus_per_node": 4,
                                              "max_nodes": 2, "price_per_gpu_hour": 0.8}]})
    assert value_at(changed, "safety.max_node_step") == 9
    assert value_at(serve, "safety.max_node_step") == load_settings().safety.max_node_step
    assert value_at(changed, "pools")[0]["max_nodes"] == 2
    assert len(serve["pools"]) == len(load_settings().pools) > 1
    assert load_settings(None, **changed).safety.max_node_step == 9


def test_a_pools_own_field_changes_that_pool_alone() -> None:
    serve = replay_settings(load_settings())
    changes = parse_changes(["pools.l4.max_nodes=1", "pools.l4.price_per_gpu_hour=0.5"])
    changed = with_changes(serve, changes)
    assert (value_at(serve, "pools.l4.max_nodes"), value_at(changed, "pools.l4.max_nodes")) == (
        load_settings().pools[-1].max_nodes, 1)
    assert value_at(changed, "pools.l4.price_per_gpu_hour") == 0.5
    assert [p for p in changed["pools"] if p["name"] != "l4"] == [
        p for p in serve["pools"] if p["name"] != "l4"]
    with pytest.raises(InputError) as raised:
        with_changes(serve, parse_changes(["pools.l5.max_nodes=1"]))
    assert str(raised.value) == ("--set pools.l5: no pool named 'l5'; the pools: a100-80gb, "
                                 "h100-80gb, l4")


@pytest.mark.parametrize(("given", "message"), [
    (["pools.l4.max_node=1"], "--set pools.l4.max_node: not a field of a pool; did you mean "
                              "max_nodes?"),
    (["pools=[]", "pools.l4.max_nodes=1"], "--set pools.l4.max_nodes: pools is set as a whole"),
    (["pools.l4.max_nodes=1", "pools=[]"], "--set pools: a pool's field is set too"),
    (["db.url=sqlite://"], "--set db.url: not a setting headroom simulate honours; the keys "
                           "it takes: autoscaling.hint_lead_s,"),
    (["=3"], "expected KEY=VALUE"),
    (["autoscaling.keep_s="], "expected KEY=VALUE"),
    (["autoscaling.keep_s=[1"], "--set autoscaling.keep_s: '[1' is not a YAML value"),
])
def test_a_change_simulate_cannot_take_is_refused_naming_it(given: list[str],
                                                            message: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_changes(given)
    assert message in str(raised.value)


def test_a_sum_of_uniform_durations_has_the_quantiles_of_its_closed_form() -> None:
    assert uniform_sum_quantiles([(60.0, 180.0)], (0.5, 0.9)) == (120.0, 168.0)
    # two of U(0, 10): a triangle on (0, 20), whose p90 is 20 - 10 sqrt(0.2)
    median, p90 = uniform_sum_quantiles([(0.0, 10.0), (0.0, 10.0)], (0.5, 0.9))
    assert median == pytest.approx(10.0, abs=0.01)
    assert p90 == pytest.approx(20 - 10 * math.sqrt(0.2), abs=0.01)
    assert uniform_sum_quantiles([(8.0, 8.0), (1.0, 3.0)], (0.5,)) == (10.0,)


def test_a_sweep_replays_once_a_value_each_with_the_set_changes_too() -> None:
    changes = parse_changes(["autoscaling.keep_s=0"])
    replays = variants(changes, parse_sweep("reconcile.target_utilization=0.7, 0.9", changes))
    assert [(v.label, dict(v.changes), v.settings_name, v.timeline_name) for v in replays] == [
        ("reconcile.target_utilization=0.7",
         {"autoscaling.keep_s": 0, "reconcile.target_utilization": 0.7},
         "settings.sweep-1.yaml", "sweep-1.csv"),
        ("reconcile.target_utilization=0.9",
         {"autoscaling.keep_s": 0, "reconcile.target_utilization": 0.9},
         "settings.sweep-2.yaml", "sweep-2.csv")]
    assert {v.option for v in replays} == {"--sweep"}
    only_set = variants(changes, None)
    assert [(v.label, v.settings_name, v.option) for v in only_set] == [
        ("--set", "settings.changed.yaml", "--set")]
    assert variants({}, None) == ()


@pytest.mark.parametrize(("text", "changes", "message"), [
    ("reconcile.target_utilization", {}, "expected KEY=V1,V2,..."),
    ("reconcile.target_utilization=0.7,,0.9", {}, "expected KEY=V1,V2,..."),
    ("reconcile.target_utilisation=0.7", {}, "--sweep reconcile.target_utilisation: not a "
                                             "setting headroom simulate honours; did you mean "
                                             "reconcile.target_utilization?"),
    ("autoscaling.keep_s=0,60", {"autoscaling.keep_s": 0}, "--sweep autoscaling.keep_s: --set "
                                                          "gives it too"),
    ("autoscaling.keep_s=0,60,0", {}, "--sweep autoscaling.keep_s: 0 given twice"),
])
def test_a_sweep_simulate_cannot_take_is_refused_naming_it(text: str, changes: dict[str, float],
                                                           message: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_sweep(text, changes)
    assert message in str(raised.value)


def test_a_swept_pool_of_no_such_name_is_refused_naming_the_sweep() -> None:
    serve = replay_settings(load_settings())
    (replay,) = variants({}, parse_sweep("pools.l5.max_nodes=2", {}))
    with pytest.raises(InputError) as raised:
        with_changes(serve, replay.changes, replay.option)
    assert str(raised.value) == ("--sweep pools.l5: no pool named 'l5'; the pools: a100-80gb, "
                                 "h100-80gb, l4")
