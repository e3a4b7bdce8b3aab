"""A preset's history is of the requests that arrived, read from a real Prometheus (Debian
package, backfilled): an LLM engine counts a request when it finishes and queues what it cannot
serve yet, so what finished plus how fast the requests its replicas hold (queued and running)
grew is the arrivals, while the queue grows and while it drains. Each tick reads what finished
and that growth (negative while the queue drains) apart."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from forecaster.sources.prometheus import PrometheusSource
from tests.forecasting.promserver import Family, prometheus

pytestmark = pytest.mark.prometheus
START = int(time.time()) // 3600 * 3600 - 4 * 3600  # a whole hour, four hours ago
END = START + 3 * 3600
ARRIVALS_RPS = 10.0
QUEUED, RANKED, BARE = "queued-vllm", "ranked-sglang", "bare-vllm"


def finished_rps(x: int) -> float:
    """What the engine finishes, ``x`` s after START, while 10 requests/s arrive: its batch
    fills over the first 10 minutes (0 -> 30 running), it then serves 8/s for 50 minutes (the
    queue grows by 2/s to 6,000), new capacity serves 12/s for 50 minutes (the queue drains by
    2/s), then 10/s."""
    if x < 600:
        return ARRIVALS_RPS - 0.05
    if x < 3600:
        return 8.0
    return 12.0 if x < 6600 else ARRIVALS_RPS


def running(x: int) -> float:
    return 0.05 * min(x, 600)


def waiting(x: int) -> float:
    return max(0.0, 2.0 * (min(x, 3600) - 600) - 2.0 * max(0, x - 3600))


def counter(per_s: Callable[[int], float]) -> list[tuple[float, float]]:
    total, out = 0.0, []
    for t in range(START, END + 1, 15):
        out.append((float(t), total))
        total += per_s(t - START) * 15
    return out


def gauge(value: Callable[[int], float]) -> list[tuple[float, float]]:
    return [(float(t), value(t - START)) for t in range(START, END + 1, 15)]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # the SGLang model's two tensor-parallel ranks report the same gauges of one replica
    ranks = ('tp_rank="0"', 'tp_rank="1"')
    families = [
        Family("vllm:request_success_total", {f'model_name="{QUEUED}"': counter(finished_rps),
                                              f'model_name="{BARE}"': counter(finished_rps)}),
        Family("vllm:num_requests_waiting", {f'model_name="{QUEUED}"': gauge(waiting)}),
        Family("vllm:num_requests_running", {f'model_name="{QUEUED}"': gauge(running)}),
        Family("sglang:num_requests_total", {f'model_name="{RANKED}"': counter(finished_rps)}),
        Family("sglang:num_queue_reqs", {f'model_name="{RANKED}",{rank}': gauge(waiting)
                                         for rank in ranks}),
        Family("sglang:num_running_reqs", {f'model_name="{RANKED}",{rank}': gauge(running)
                                           for rank in ranks}),
    ]
    with prometheus(tmp_path_factory.mktemp("held"), families) as url:
        yield url


def at(x: int) -> datetime:
    return datetime.fromtimestamp(START + x, UTC)


@pytest.mark.parametrize(("preset", "model"), [("vllm", QUEUED), ("sglang", RANKED)])
def test_the_history_reads_the_arrivals_while_the_queue_grows_and_while_it_drains(
        prom_url: str, preset: str, model: str) -> None:
    src = PrometheusSource(prom_url, preset=preset, models=[model])
    series = src.rate_history(model, at(0), at(3 * 3600 - 600), 600)
    # finished alone reads 9.95, 8 (five steps), 12 (five steps), then 10
    assert list(series.values) == pytest.approx([ARRIVALS_RPS] * 17, rel=1e-6)


def test_a_model_whose_engine_exports_no_held_gauges_has_the_history_of_what_finished(
        prom_url: str) -> None:
    src = PrometheusSource(prom_url, preset="vllm", models=[BARE])
    series = src.rate_history(BARE, at(0), at(3 * 3600 - 600), 600)
    assert list(series.values) == pytest.approx(
        [finished_rps(600 * step) for step in range(17)], rel=1e-6)


def test_each_tick_reads_what_finished_and_the_held_requests_growth_apart(
        prom_url: str) -> None:
    src = PrometheusSource(prom_url, preset="vllm")
    growth = {x: src.current_queued([QUEUED], at(x), "vllm", growth=True).rates[QUEUED]
              for x in (600, 2400, 4800)}
    # the batch filling (running, not queued), the queue growing, and draining: a fall keeps
    # its sign, so what finished plus it is what arrived at every tick
    assert growth == {600: pytest.approx(0.05), 2400: pytest.approx(2.0),
                      4800: pytest.approx(-2.0)}
    finished = {x: src.current_rates([QUEUED], at(x)).rates[QUEUED] for x in growth}
    assert finished == {600: pytest.approx(9.95), 2400: pytest.approx(8.0),
                        4800: pytest.approx(12.0)}
    assert {x: finished[x] + growth[x] for x in growth} == pytest.approx(
        {x: ARRIVALS_RPS for x in growth})
