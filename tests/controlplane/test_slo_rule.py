"""A model is short of its SLO when its ready capacity is below its demand, its queue holds over
30 s of that capacity, its KV cache is over 95 % full or its latency is above its SLO, each
reason named; at a threshold is within it, a signal not read is not short, and a model whose
demand or capacity is unknown is unknown unless a signal read short."""

from __future__ import annotations

import math

import pytest

from controlplane.domain.slo import slo_shortfalls, slo_status

NAN = math.nan


@pytest.mark.parametrize(("read", "reasons"), [
    ((10.0, 10.0), ()),
    ((10.5, 10.0), ("capacity",)),
    ((5.0, 10.0, 301.0), ("queue",)),
    ((5.0, 10.0, 300.0), ()),
    ((5.0, 10.0, NAN, 0.951), ("kv_cache",)),
    ((5.0, 10.0, NAN, 0.95), ()),
    ((5.0, 10.0, NAN, NAN, 40.5, 40.0), ("latency",)),
    ((5.0, 10.0, NAN, NAN, 40.0, 40.0), ()),
    ((5.0, 10.0, NAN, NAN, 400.0, NAN), ()),  # no SLO: a model not listed
    ((11.0, 10.0, 301.0, 0.99, 41.0, 40.0), ("capacity", "queue", "kv_cache", "latency")),
])
def test_each_reason_is_named_above_its_threshold_and_none_at_it(
        read: tuple[float, ...], reasons: tuple[str, ...]) -> None:
    assert slo_shortfalls(*read) == reasons
    assert slo_status(*read) == ("short" if reasons else "ok")


def test_unknown_demand_or_capacity_is_unknown_unless_a_signal_reads_short() -> None:
    assert slo_status(NAN, 10.0) == "unknown"
    assert slo_status(5.0, NAN, 10.0, 0.5) == "unknown"
    assert slo_status(NAN, 10.0, NAN, 0.99) == "short"
    assert slo_status(NAN, NAN, NAN, NAN, 50.0, 40.0) == "short"
