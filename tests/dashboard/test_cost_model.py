"""The cost model: slice shares, per-GPU splits, fleet rates, accrual, daily totals."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.domain.cost import (
    DEFAULT_PRICES,
    FALLBACK_USD_PER_GPU_HOUR,
    CostCategory,
    FleetSnapshot,
    GpuPrice,
    GpuUsage,
    PriceError,
    PriceTable,
    SliceUse,
    accrue,
    attribute_warm,
    billed_rate,
    cost_per_million,
    fleet_cost_rate,
    slice_shares,
    split_gpu,
)
from controlplane.domain.cost_gaps import hours_per_day, spans_text, unrecorded_spans

A100 = GpuPrice("A100-80GB", 7.0, "test", "2026")
T0 = datetime(2026, 3, 2, 22, 0, tzinfo=UTC)


def test_mig_slices_cost_their_compute_fraction_and_the_rest_is_idle() -> None:
    usage = GpuUsage("A100-80GB", (SliceUse("llm", "acme", 3), SliceUse("bert", "globex", 2)))
    lines = {(line.category, line.model): line for line in split_gpu(usage, A100)}
    assert lines[(CostCategory.SERVING, "llm")].usd_per_hour == pytest.approx(3.0)
    assert lines[(CostCategory.SERVING, "bert")].usd_per_hour == pytest.approx(2.0)
    assert lines[(CostCategory.IDLE, "__idle__")].usd_per_hour == pytest.approx(2.0)


def test_mps_and_time_sliced_replicas_split_a_whole_gpu_evenly() -> None:
    shares = slice_shares((SliceUse("a", "t"), SliceUse("b", "t"), SliceUse("c", "t")), 7)
    assert shares == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_segments_without_a_slice_share_what_mig_slices_leave() -> None:
    shares = slice_shares((SliceUse("mig", "t", 4), SliceUse("a", "t"), SliceUse("b", "t")), 7)
    assert shares == pytest.approx((4 / 7, 1.5 / 7, 1.5 / 7))


def test_an_invalid_layout_claiming_more_than_the_gpu_is_scaled_to_one_gpu() -> None:
    shares = slice_shares((SliceUse("a", "t", 7), SliceUse("b", "t", 7)), 7)
    assert sum(shares) == pytest.approx(1.0)


def test_four_slice_products_price_a_slice_at_a_quarter() -> None:
    usage = GpuUsage("A30-24GB", (SliceUse("m", "t", 1),))
    usd = {x.category: x.usd_per_hour for x in split_gpu(usage, GpuPrice("A30-24GB", 4.0, "t",
                                                                           "2026"))}
    assert usd == pytest.approx({CostCategory.SERVING: 1.0, CostCategory.IDLE: 3.0})


def test_identical_gpus_are_priced_by_their_count() -> None:
    usage = GpuUsage("A100-80GB", (SliceUse("m", "t", 7),), gpus=5)
    (line,) = split_gpu(usage, A100)
    assert line.usd_per_hour == pytest.approx(35.0)
    assert line.gpus == pytest.approx(5.0)


def test_unplaced_billed_gpus_are_warm_up_to_the_warm_pool_and_idle_beyond() -> None:
    snapshot = FleetSnapshot(T0, {"A100-80GB": 8}, {"A100-80GB": 2},
                             (GpuUsage("A100-80GB", (SliceUse("m", "t", 7),), gpus=4),))
    lines = fleet_cost_rate(snapshot, PriceTable((A100,)))
    usd = {line.category: line.usd_per_hour for line in lines}
    assert usd == pytest.approx({CostCategory.SERVING: 28.0, CostCategory.WARM: 14.0,
                                 CostCategory.IDLE: 14.0})


def test_a_plan_ahead_of_billing_splits_only_the_billed_gpus_in_its_proportions() -> None:
    snapshot = FleetSnapshot(T0, {"A100-80GB": 2}, {}, (
        GpuUsage("A100-80GB", (SliceUse("a", "t", 7),), gpus=3),
        GpuUsage("A100-80GB", (SliceUse("b", "t", 7),), gpus=1)))
    lines = {x.model: x for x in fleet_cost_rate(snapshot, PriceTable((A100,)))}
    assert lines["a"].usd_per_hour == pytest.approx(10.5)
    assert lines["b"].usd_per_hour == pytest.approx(3.5)
    assert lines["a"].gpus == pytest.approx(1.5)


def test_configured_prices_override_defaults_and_unknown_products_fall_back_visibly() -> None:
    table = PriceTable().with_overrides([GpuPrice("L4", 0.5, "config", "2026-11")])
    assert table.price_of("L4").usd_per_gpu_hour == 0.5
    assert table.price_of("H100-80GB").source.startswith("REFERENCE.md")
    fallback = table.price_of("MI300X")
    assert fallback.usd_per_gpu_hour == FALLBACK_USD_PER_GPU_HOUR
    assert "OpenCost" in fallback.source


def test_every_default_price_states_its_source_and_date() -> None:
    assert all(p.source and p.as_of for p in DEFAULT_PRICES)


def test_a_negative_or_infinite_price_is_rejected_naming_the_product() -> None:
    with pytest.raises(PriceError, match=r"L4.*usd_per_gpu_hour"):
        GpuPrice("L4", -1.0, "x", "y")
    with pytest.raises(PriceError, match="T4"):
        GpuPrice("T4", math.inf, "x", "y")


def test_accrual_holds_each_rate_until_the_next_sample_and_splits_at_midnight() -> None:
    rate_a = fleet_cost_rate(FleetSnapshot(T0, {"A100-80GB": 1}, {}, ()), PriceTable((A100,)))
    rate_b = fleet_cost_rate(FleetSnapshot(T0, {"A100-80GB": 2}, {}, ()), PriceTable((A100,)))
    accruals = accrue([(T0, rate_a), (T0 + timedelta(hours=1), rate_b)],
                      T0 + timedelta(hours=4))
    by_day = {a.day: a.usd for a in accruals}
    # 22:00-23:00 at $7/h, 23:00-24:00 at $14/h on day 1; 00:00-02:00 at $14/h on day 2
    assert by_day == pytest.approx({"2026-03-02": 21.0, "2026-03-03": 28.0})
    assert {a.day: a.gpu_hours for a in accruals} == pytest.approx(
        {"2026-03-02": 3.0, "2026-03-03": 4.0})


def test_cost_per_million_requests_is_none_without_requests() -> None:
    assert cost_per_million(10.0, 0.0) is None
    assert cost_per_million(10.0, 2_000_000) == pytest.approx(5.0)


def test_warm_gpus_go_to_products_in_proportion_to_their_unplaced_gpus() -> None:
    assert attribute_warm(3, {"A100-80GB": 4, "L4": 2, "H100-80GB": 0}) == {"A100-80GB": 2,
                                                                            "L4": 1}
    assert attribute_warm(10, {"L4": 2}) == {"L4": 2}
    assert attribute_warm(0, {"L4": 2}) == {}


slice_lists = st.lists(
    st.builds(SliceUse, st.sampled_from(["a", "b", "c"]), st.sampled_from(["t1", "t2"]),
              st.integers(min_value=0, max_value=7)), max_size=9)


@settings(max_examples=300, deadline=None)
@given(slice_lists, st.floats(min_value=0, max_value=100, allow_nan=False),
       st.integers(min_value=1, max_value=50))
def test_slice_costs_of_a_gpu_sum_to_the_gpus_price(segments: list[SliceUse], usd: float,
                                                    gpus: int) -> None:
    usage = GpuUsage("H100-80GB", tuple(segments), gpus)
    lines = split_gpu(usage, GpuPrice("H100-80GB", usd, "test", "2026"))
    assert sum(x.usd_per_hour for x in lines) == pytest.approx(usd * gpus, abs=1e-9)
    assert all(x.usd_per_hour >= 0 for x in lines)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["A100-80GB", "L4", "H100-80GB"]), slice_lists,
                          st.integers(min_value=1, max_value=8)), max_size=6),
       st.dictionaries(st.sampled_from(["A100-80GB", "L4", "T4"]),
                       st.integers(min_value=0, max_value=64)),
       st.dictionaries(st.sampled_from(["A100-80GB", "L4"]), st.integers(min_value=0,
                                                                          max_value=16)))
def test_fleet_lines_sum_to_what_the_fleet_is_billed(
        placed: list[tuple[str, list[SliceUse], int]], billed: dict[str, int],
        warm: dict[str, int]) -> None:
    snapshot = FleetSnapshot(T0, billed, warm, tuple(GpuUsage(p, tuple(s), n)
                                                     for p, s, n in placed))
    lines = fleet_cost_rate(snapshot, PriceTable())
    assert sum(x.usd_per_hour for x in lines) == pytest.approx(billed_rate(snapshot,
                                                                           PriceTable()))
    warm_lines = sum(x.gpus for x in lines if x.category is CostCategory.WARM)
    assert warm_lines <= sum(warm.values()) + 1e-9


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=48 * 60), min_size=1, max_size=20),
       st.integers(min_value=0, max_value=16))
def test_accrued_dollars_equal_rate_times_time_held(offsets_min: list[int], gpus: int) -> None:
    table = PriceTable((A100,))
    samples = [(T0 + timedelta(minutes=m), fleet_cost_rate(
        FleetSnapshot(T0, {"A100-80GB": gpus}, {}, ()), table)) for m in sorted(set(offsets_min))]
    until_at = T0 + timedelta(hours=49)
    hours = (until_at - samples[0][0]).total_seconds() / 3600
    assert sum(a.usd for a in accrue(samples, until_at)) == pytest.approx(7.0 * gpus * hours)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=40),
       st.dictionaries(st.sampled_from(["A100-80GB", "H100-80GB", "L4", "T4"]),
                       st.integers(min_value=0, max_value=20)))
def test_warm_attribution_never_exceeds_the_unplaced_gpus(total: int,
                                                           unplaced: dict[str, int]) -> None:
    warm = attribute_warm(total, unplaced)
    assert sum(warm.values()) == min(total, sum(unplaced.values()))
    assert all(0 < n <= unplaced[p] for p, n in warm.items())


def test_a_stretch_without_a_plan_is_clipped_to_the_window_and_ordinary_ticking_is_none() -> None:
    t = datetime(2026, 3, 2, 21, 0, tzinfo=UTC)
    plans_at = [t, t + timedelta(seconds=30), t + timedelta(seconds=60), t + timedelta(hours=5)]
    spans = unrecorded_spans(plans_at, t + timedelta(hours=2), t + timedelta(hours=6), 600.0)
    assert spans == ((t + timedelta(hours=2), t + timedelta(hours=5)),  # from inside the gap
                     (t + timedelta(hours=5), t + timedelta(hours=6)))  # after the last plan
    assert hours_per_day(spans) == {"2026-03-02": 1.0, "2026-03-03": 3.0}
    assert spans_text(spans[:1]) == "from 2026-03-02 23:00:00 to 2026-03-03 02:00:00 UTC (3.0 h)"
    assert unrecorded_spans([], t, t + timedelta(hours=6), 600.0) == ()  # no plan: nothing held
