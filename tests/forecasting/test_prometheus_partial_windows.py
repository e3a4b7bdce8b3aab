"""History steps whose rate window Prometheus scraped only in part, against a real Prometheus
(Debian package): a counter at a constant 10 req/s, scraped every 15 s off the step grid, that
starts within the history, pauses for 20 minutes and stops before the forecast time. Prometheus'
rate of a window its samples reach at one end only is a fraction of 10; such a step is missing
data with a warning, never a low rate, and every step kept reads 10."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from forecaster.sources.prometheus import DEFAULT_RATE_WINDOW_S, PrometheusSource
from tests.forecasting.promserver import Family, prometheus

pytestmark = pytest.mark.prometheus
HOUR = int(time.time()) // 3600 * 3600 - 6 * 3600  # whole hour, six hours ago
RPS = 10.0
INTERVAL_S = 15
#: scraped spans (first, last sample), 7 s off the minute: data begins, pauses, stops
SPANS = ((HOUR + 1807, HOUR + 2 * 3600 + 7), (HOUR + 2 * 3600 + 1207, HOUR + 4 * 3600 + 1507))
SINCE, UNTIL = HOUR, HOUR + 5 * 3600


def counter() -> list[tuple[float, float]]:
    """Samples of the spans; the counter counts on through the pause (a missed scrape, not an
    idle model), from far above 0 (no zero-point limit on Prometheus' extrapolation)."""
    return [(float(t), 1e6 + RPS * (t - SPANS[0][0]))
            for first, last in SPANS for t in range(first, last + 1, INTERVAL_S)]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    families = [Family("nv_inference_request_success", {'model="c",version="1"': counter()})]
    with prometheus(tmp_path_factory.mktemp("partial"), families) as url:
        yield url


def at(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def scraped_throughout(start_s: int, end_s: int) -> bool:
    """Whether one span has a sample within 1.1 intervals before both ends of the window."""
    return any(first <= start_s and end_s <= last + 1.1 * INTERVAL_S for first, last in SPANS)


@pytest.mark.parametrize("step_s", [60, 90, 600])
def test_a_step_whose_rate_window_was_scraped_in_part_is_missing_with_a_warning_not_a_low_rate(
        prom_url: str, step_s: int) -> None:
    window_s = max(step_s, DEFAULT_RATE_WINDOW_S)
    got = PrometheusSource(prom_url, models=["c"]).read_history("c", at(SINCE), at(UNTIL), step_s)
    values = got.series.values
    ends_s = [SINCE + (i + 1) * step_s for i in range(len(values))]
    kept = [i for i, v in enumerate(values) if not math.isnan(v)]
    assert kept == [i for i, end_s in enumerate(ends_s)
                    if scraped_throughout(end_s - window_s, end_s)]
    assert [values[i] for i in kept] == pytest.approx([RPS] * len(kept), rel=1e-9)
    (line,) = got.warnings
    assert f"their {window_s} s rate window only partly scraped" in line
    assert "starting before the first sample" in line
    assert "at the edge of a scrape gap" in line
    assert f"running past the newest sample at {at(SPANS[1][1]).isoformat()}" in line

