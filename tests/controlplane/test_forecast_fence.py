"""Serve's forecast refreshes are stored under the leader's fencing token, as its tick records
are (``controlplane/forecast_refresh.py``): a deposed leader's late refresh stores nothing, so
its older forecasts never become the newest ones the new leader's ticks size from."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta

import pytest
from test_tick_fence import Term
from tick_builders import T0

from controlplane.domain.errors import Fenced
from controlplane.forecast_refresh import refresh_forecasts
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.store import Store
from forecaster.types import Forecast
from tests.forecasting.test_forecast_job import MODELS, NOW, filled_store

PERSISTENCE = {"method": "persistence", "history_s": 86_400, "state_dir": None}


def _forecast(model: str, level_rps: float) -> Forecast:
    return Forecast(model, NOW, 60, (level_rps,) * 20, (level_rps * 1.2,) * 20, "persistence")


def _levels(store: Store) -> dict[str, float]:
    return {model: made.p50[0] for model, made in store.latest_forecasts().items()}


def test_a_save_under_an_older_token_is_refused_whole_and_an_unfenced_one_is_kept(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    old, new = store.claim_fence("replica-a", NOW), store.claim_fence("replica-b", NOW)
    store.save_forecasts([_forecast(MODELS[0], 7.0)], NOW, fence=new)
    with pytest.raises(Fenced) as refused:
        store.save_forecasts([_forecast(MODELS[0], 5.0), _forecast(MODELS[1], 5.0)], NOW,
                             fence=old)
    assert (refused.value.token, refused.value.newest, refused.value.holder) == (
        1, 2, "replica-b")
    assert _levels(store) == {MODELS[0]: 7.0}  # neither of the refused two was stored
    store.save_forecasts([_forecast(MODELS[1], 9.0)], NOW)  # `headroom forecast run`: unfenced
    assert _levels(store) == {MODELS[0]: 7.0, MODELS[1]: 9.0}
    store.engine.dispose()


def test_a_deposed_leaders_refresh_stores_nothing_and_logs_that_it_no_longer_leads(
        store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    store = filled_store(store_url)
    settings = load_settings(forecast=PERSISTENCE)
    mine = store.claim_fence("replica-a", NOW)
    made = refresh_forecasts(store, store, NOW, settings, fence=mine)
    assert sorted(f.series_id for f in made) == sorted(MODELS)
    leaders = {model: 1000.0 + k for k, model in enumerate(MODELS)}
    store.save_forecasts([_forecast(m, rps) for m, rps in leaders.items()], NOW,
                         fence=store.claim_fence("replica-b", NOW))  # took over, refreshed
    with caplog.at_level(logging.INFO, logger="headroom"):
        late = refresh_forecasts(store, store, NOW + timedelta(minutes=1), settings, fence=mine)
    assert late == []
    assert _levels(store) == leaders  # the new leader's forecasts stay the newest
    events = [r for r in caplog.records if r.getMessage().startswith("forecast.")]
    assert [(r.getMessage(), r.levelno) for r in events] == [("forecast.fenced", logging.ERROR)]
    assert events[0].__dict__["error"].startswith("leader's writes: fenced: this process's "
                                                  "token 1 is not the store's newest (2, "
                                                  "claimed by replica-b)")
    store.engine.dispose()


def test_a_serve_replica_refreshes_under_its_terms_token_and_again_after_it_leads_anew(
        sqlite_url: str) -> None:
    settings = load_settings(db={"url": sqlite_url}, sim={"history_s": 6 * 3600},
                             forecast=PERSISTENCE)
    term = Term(1)
    runtime = SimRuntime.open(settings, Store.open(sqlite_url, migrate=True), T0,
                              writer="replica-a", term=term)
    store = runtime.store
    assert runtime.refresh_forecasts()  # claims token 1 for term 1
    taken_over_at = runtime.clock.now()
    store.save_forecasts([replace(f, p50=(1e6,) * len(f.p50))
                          for f in store.latest_forecasts().values()], taken_over_at,
                         fence=store.claim_fence("replica-b", taken_over_at))
    assert runtime.refresh_forecasts() == []  # term 1 ended: replica-b leads now
    assert set(_levels(store).values()) == {1e6}
    term.term = 2  # replica-a leads again: a new term claims the next token
    refreshed = runtime.refresh_forecasts()
    assert refreshed and {m: f.p50[0] for m, f in
                          ((f.series_id, f) for f in refreshed)} == _levels(store)
    assert 1e6 not in _levels(store).values()
    store.engine.dispose()
