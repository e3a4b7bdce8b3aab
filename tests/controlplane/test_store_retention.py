"""Store retention on SQLite and PostgreSQL: old decisions, forecasts, observations, ended demand
hints and finished MIG re-layouts go, whole; the newest tick, each model's newest forecast and
every active re-layout stay."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import event
from tick_builders import T0, sample_tick_report

from controlplane.domain.hints import DemandHint
from controlplane.domain.lease import LeaseRecord
from controlplane.domain.mig_layout import DeviceGroupLayout, NodeMigLayout
from controlplane.domain.mig_relayout import RelayoutPhase, RelayoutPolicy, start_relayout
from controlplane.runtime import SimRuntime, prune_store
from controlplane.settings import ConfigError, load_settings
from controlplane.store import Store
from controlplane.store.hints import SqlDemandHints
from controlplane.store.lease import SqlLeaseStore
from controlplane.store.relayout import SqlRelayoutStore
from controlplane.store.retention import Pruned, retention_cutoff
from forecaster.types import Forecast

DAY = timedelta(days=1)


def _forecast(model: str) -> Forecast:
    return Forecast(series_id=model, origin_at=T0, step_s=300, p50=(1.0,), p90=(2.0,),
                    method="persistence")


def _filled(url: str) -> Store:
    """Ticks on days 0, 1 and 40; forecasts of two models on day 0 and of one on day 40;
    observations on days 0 and 40."""
    store = Store.open(url, migrate=True)
    for day in (0, 1, 40):
        at = T0 + day * DAY
        report = sample_tick_report()
        store.save_tick(replace(report, started_at=at, finished_at=at + timedelta(seconds=1)))
    store.save_forecasts([_forecast("a"), _forecast("b")], T0)
    store.save_forecasts([_forecast("a")], T0 + 40 * DAY)
    store.save_observations([("a", T0, 5.0), ("b", T0, 6.0), ("a", T0 + 40 * DAY, 7.0)])
    return store


def test_rows_before_the_cutoff_go_with_everything_hanging_off_their_ticks(
        store_url: str) -> None:
    store = _filled(store_url)
    before = store.counts()
    pruned = prune_store(store, T0 + 40 * DAY, load_settings(db={"retention_s": 30 * 86400}))
    assert pruned == Pruned(ticks=2, plans=2, actions=6, outcomes=4, placements=2,
                            forecasts=1, observations=2)
    after = store.counts()
    assert after["ticks"] == before["ticks"] - 2 == 1
    assert after["placements"] == 1 and after["actions"] == 3  # two applied, one skipped
    # model b's only forecast is old but stays: it is the newest of b
    assert set(store.latest_forecasts()) == {"a", "b"}
    history = store.rate_history("a", T0 - DAY, T0 + 41 * DAY, 86400).values
    assert [v for v in history if v == v] == [7.0]  # day 0's observation went, day 40's stays
    assert store.last_tick_at() == T0 + 40 * DAY


def test_the_newest_tick_stays_however_old_so_a_restarted_loop_resumes_from_it(
        store_url: str) -> None:
    store = _filled(store_url)
    prune_store(store, T0 + 400 * DAY, load_settings(db={"retention_s": 30 * 86400}))
    assert store.counts()["ticks"] == 1 and store.last_tick_at() == T0 + 40 * DAY
    assert store.last_guard_memory() == sample_tick_report().guard_memory
    assert store.last_observed() is not None


@pytest.mark.postgres  # SQLite lets one writer at a time: no tick lands while the prune runs
def test_a_tick_saved_while_the_prune_runs_leaves_the_prune_whole(postgres_url: str) -> None:
    # a loop back after more than the retention: its first tick and the store job run at once
    store = _filled(postgres_url)
    writer = Store.open(postgres_url)
    now = T0 + 400 * DAY

    def tick_lands_meanwhile(_conn: object, _cursor: object, statement: str,
                             *_rest: object) -> None:
        if statement.startswith("DELETE FROM ticks") and writer.last_tick_at() != now:
            writer.save_tick(replace(sample_tick_report(), started_at=now, finished_at=now))

    event.listen(store.engine, "before_cursor_execute", tick_lands_meanwhile)
    pruned = prune_store(store, now, load_settings(db={"retention_s": 30 * 86400}))
    assert pruned is not None and (pruned.ticks, pruned.plans) == (2, 2)
    assert store.counts()["ticks"] == store.counts()["plans"] == 2  # day 40's and the new one
    assert store.last_tick_at() == now


def test_pruning_twice_deletes_nothing_more_and_zero_retention_keeps_everything(
        store_url: str) -> None:
    store = _filled(store_url)
    settings = load_settings(db={"retention_s": 30 * 86400})
    first = prune_store(store, T0 + 40 * DAY, settings)
    assert first is not None and first.total > 0
    again = prune_store(store, T0 + 40 * DAY, settings)
    assert again is not None and again.total == 0
    kept = store.counts()
    assert prune_store(store, T0 + 400 * DAY, load_settings(db={"retention_s": 0})) is None
    assert store.counts() == kept


def test_the_fleet_lease_stays_however_old_its_last_renewal(store_url: str) -> None:
    store = _filled(store_url)
    leases = SqlLeaseStore(store.engine)
    assert leases.create_lease("sim-fleet", LeaseRecord("host-1", 15, T0, T0, 0))
    pruned = prune_store(store, T0 + 400 * DAY, load_settings(db={"retention_s": 30 * 86400}))
    assert pruned is not None and pruned.total > 0
    kept = leases.read_lease("sim-fleet")
    assert kept is not None and (kept.holder, kept.renew_at) == ("host-1", T0)


def test_hints_that_ended_and_relayouts_that_finished_before_the_cutoff_go_active_ones_stay(
        store_url: str) -> None:
    store = _filled(store_url)
    hints = SqlDemandHints(store.engine)
    ended = hints.add_hint(DemandHint("a", 50.0, T0, T0 + DAY, "launch"), T0)
    running = hints.add_hint(DemandHint("a", 80.0, T0, T0 + 60 * DAY, "season"), T0)
    relayouts = SqlRelayoutStore(store.engine)
    layout = NodeMigLayout("A100-80GB", (DeviceGroupLayout((0,), ("3g.40gb", "3g.40gb")),))
    done = start_relayout("gpu-1", "a100", "all-1g.10gb", "headroom-mig-a", layout, T0,
                          RelayoutPolicy(), "placement")
    stuck = start_relayout("gpu-2", "a100", "all-1g.10gb", "headroom-mig-b", layout, T0,
                           RelayoutPolicy(), "placement")
    relayouts.save_relayout(replace(done, phase=RelayoutPhase.DONE, deadline_at=None))
    relayouts.save_relayout(stuck)  # still draining, 40 days on: a restart resumes it
    pruned = prune_store(store, T0 + 40 * DAY, load_settings(db={"retention_s": 30 * 86400}))
    assert pruned is not None and (pruned.hints, pruned.relayouts) == (1, 1)
    assert [h.hint_id for h in hints.hints()] == [running.hint_id]
    assert ended.hint_id != running.hint_id
    assert relayouts.relayouts_of("gpu-1") == ()
    assert relayouts.active_relayouts() == (stuck,)


def test_a_retention_shorter_than_the_forecasters_history_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"db\.retention_s .* forecast\.history_s"):
        load_settings(db={"retention_s": 86400}, forecast={"history_s": 7 * 86400})


def test_a_retention_shorter_than_the_relayout_retry_backoff_is_refused_naming_both() -> None:
    with pytest.raises(ConfigError, match=r"k8s\.relayout_retry_after_s .* db\.retention_s"):
        load_settings(db={"retention_s": 8 * 86400}, k8s={"relayout_retry_after_s": 9 * 86400})
    kept = load_settings(db={"retention_s": 0}, k8s={"relayout_retry_after_s": 9 * 86400})
    assert kept.k8s.relayout_retry_after_s == 9 * 86400  # retention 0 keeps everything


def test_the_cutoff_is_now_minus_the_retention_or_none_to_keep_everything() -> None:
    assert retention_cutoff(T0, 86400) == T0 - DAY
    assert retention_cutoff(T0, 0) is None


def test_the_demo_loop_prunes_on_its_own_schedule(sqlite_url: str) -> None:
    settings = load_settings(db={"url": sqlite_url, "retention_s": 86400,
                                 "prune_interval_s": 600},
                             forecast={"history_s": 86400},
                             sim={"history_s": 3 * 86400})  # backfilled: 3 days back
    runtime = SimRuntime.open(settings, Store.open(sqlite_url, migrate=True), T0)
    runtime.advance(60)  # the first jobs: forecast, tick and prune
    oldest = runtime.store.rate_history("bert-embed", T0 - 4 * DAY, T0, 3600).values
    assert all(v != v for v in oldest[:2 * 24])  # the first two backfilled days went at once
    assert any(v == v for v in oldest[-24:])
