"""A custom PromQL rate query (``prometheus.query``) is dated by the newest sample of the series
the operator names in ``prometheus.query_sample_series`` (a real Prometheus, backfilled with
promtool), so ``reconcile.max_staleness_s`` holds a stale custom rate as it holds a preset's;
without that series, the custom rates are undated and every tick's notes say so."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from apiserver import ApiServer
from k8s_harness import make_backend
from pydantic import ValidationError
from test_k8s_prometheus_load import LLAMA, LLAMA_RPS, SPECS, STOPPED_WINDOW_S, live_counter, seed

from controlplane.adapters.prometheus import PrometheusLoad, per_replica_rps, prometheus_source
from controlplane.domain.observed import ObservedState
from controlplane.settings_cluster import PrometheusSettings
from controlplane.sim.clock import VirtualClock
from tests.forecasting.promserver import Family, prometheus

pytestmark = pytest.mark.prometheus
CUSTOM = 'sum(rate(nv_inference_request_success{model="{model}"}[{window}]))'
SERIES = 'nv_inference_request_success{model="{model}"}'


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    counter = live_counter(LLAMA_RPS, now=int(time.time()))
    family = Family("nv_inference_request_success", {f'model="{LLAMA}",version="1"': counter})
    with prometheus(tmp_path_factory.mktemp("live"), [family]) as url:
        yield url


@pytest.fixture(scope="module")
def stopped_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Stopped scraping llama 10 minutes before it started (see test_k8s_prometheus_load)."""
    counter = live_counter(LLAMA_RPS, stopped_s=600, now=int(time.time()))
    family = Family("nv_inference_request_success", {f'model="{LLAMA}",version="1"': counter})
    with prometheus(tmp_path_factory.mktemp("stopped"), [family]) as url:
        yield url


def snapshot(apiserver: ApiServer, settings: PrometheusSettings,
             clock: VirtualClock) -> ObservedState:
    seed(apiserver)
    load = PrometheusLoad(prometheus_source(settings), per_replica_rps(SPECS))
    return make_backend(apiserver, clock, load=load).reader.snapshot()


def now_clock() -> VirtualClock:
    return VirtualClock(datetime.fromtimestamp(int(time.time()), UTC))


def test_a_custom_rate_is_dated_by_the_newest_sample_of_its_named_series(
        apiserver: ApiServer, live_url: str) -> None:
    clock = now_clock()
    observed = snapshot(apiserver, PrometheusSettings(
        url=live_url, query=CUSTOM, query_sample_series=SERIES), clock)
    llama = observed.model(LLAMA)
    assert llama is not None and llama.demand_measured
    assert llama.demand_rps == pytest.approx(LLAMA_RPS)
    data_at = observed.data_at
    assert data_at is not None and 0 <= (clock.now() - data_at).total_seconds() < 15
    assert not any("no sample time" in n for n in observed.notes)


def test_a_custom_rate_whose_named_series_stopped_ten_minutes_ago_is_not_measured_this_tick(
        apiserver: ApiServer, stopped_url: str) -> None:
    observed = snapshot(apiserver, PrometheusSettings(
        url=stopped_url, query=CUSTOM, query_sample_series=SERIES,
        rate_window_s=STOPPED_WINDOW_S), now_clock())
    llama = observed.model(LLAMA)
    assert llama is not None and not llama.demand_measured
    assert any(n.startswith(f"{LLAMA}: demand not measured this tick: its newest sample is ")
               for n in observed.notes)


def test_a_custom_rate_without_a_named_series_is_measured_but_noted_as_undated(
        apiserver: ApiServer, stopped_url: str) -> None:
    observed = snapshot(apiserver, PrometheusSettings(
        url=stopped_url, query=CUSTOM, rate_window_s=STOPPED_WINDOW_S), now_clock())
    llama = observed.model(LLAMA)
    assert llama is not None and llama.demand_measured  # nothing can tell it is stale
    assert (f"1 model(s) ({LLAMA}): the custom prometheus.query carries no sample time "
            "(set prometheus.query_sample_series): reconcile.max_staleness_s is not checked "
            "for their rates") in observed.notes


def test_a_sample_series_without_a_custom_query_or_a_model_placeholder_is_refused() -> None:
    with pytest.raises(ValidationError, match=re.escape(
            "prometheus.query_sample_series dates a custom prometheus.query")):
        PrometheusSettings(url="http://127.0.0.1:9", query_sample_series=SERIES)
    with pytest.raises(ValidationError, match=re.escape("has no {model} placeholder")):
        PrometheusSettings(url="http://127.0.0.1:9", query=CUSTOM,
                           query_sample_series="nv_inference_request_success")
