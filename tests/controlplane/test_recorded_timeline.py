"""The loop's own minutes as simulate's timeline rows (`controlplane.recorded_timeline`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controlplane.domain.models import ProfilePoint
from controlplane.recorded_timeline import Seen, minute_rows
from controlplane.simulation.engine import MinuteRow

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
A100_3G = ProfilePoint("A100-80GB", 3, 8, 1, 20.0, 300.0, 30_000)  # a replica: 20 rps on 3/7


def _at(s: float) -> datetime:
    return AT + timedelta(seconds=s)


def test_a_minute_is_its_observations_mean_demand_fewest_ready_and_mean_billed_gpus() -> None:
    seen = [Seen("chat", _at(0), 10.0, 60.0, 3), Seen("chat", _at(30), 20.0, 40.0, 2)]
    billed = [(_at(0), {"A100-80GB": 8, "L4": 8}), (_at(30), {"A100-80GB": 16, "L4": 8})]
    assert minute_rows(seen, billed, {"chat": A100_3G}) == (
        MinuteRow(AT, "chat", 15.0, 2, 0, 20.0, 3 / 7, 20.0, "A100-80GB", 12.0),)


def test_a_minute_without_a_tick_or_a_model_without_a_shape_has_no_row() -> None:
    seen = [Seen("chat", _at(0), 10.0, 40.0, 2), Seen("chat", _at(60), 10.0, 40.0, 2),
            Seen("gone", _at(0), 5.0, 10.0, 1)]
    rows = minute_rows(seen, [(_at(0), {"A100-80GB": 8})], {"chat": A100_3G})
    assert [(r.minute_at, r.model) for r in rows] == [(AT, "chat")]


def test_with_no_replica_ready_a_replica_is_credited_with_its_profile() -> None:
    rows = minute_rows([Seen("chat", _at(0), 10.0, 0.0, 0)], [(_at(0), {"A100-80GB": 8})],
                       {"chat": A100_3G})
    assert (rows[0].ready_replicas, rows[0].per_replica_rps) == (0, 20.0)


def test_rows_run_by_minute_and_then_model() -> None:
    seen = [Seen(m, _at(s), 1.0, 20.0, 1) for s in (60, 0) for m in ("b", "a")]
    billed = [(_at(0), {"A100-80GB": 8}), (_at(60), {"A100-80GB": 8})]
    rows = minute_rows(seen, billed, {"a": A100_3G, "b": A100_3G})
    assert [(r.minute_at, r.model) for r in rows] == [
        (AT, "a"), (AT, "b"), (_at(60), "a"), (_at(60), "b")]
