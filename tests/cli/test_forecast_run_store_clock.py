"""`headroom forecast run` from a store's observations forecasts from the store's now: on a
demo's store, its simulated clock's last tick, where its observations end."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env, simulated_store

from controlplane.adapters.clock import WallClock
from controlplane.domain.timestamps import utc_text


@pytest.mark.parametrize("days", [-2, 5], ids=["store-behind-the-wall-clock", "store-ahead-of-it"])
def test_on_a_simulated_store_the_forecast_origin_is_its_last_tick_not_the_wall_clock(
        tmp_path: Path, days: int) -> None:
    """A demo started days off the wall clock (``--start``): from the wall clock's now, every
    model's history was days stale (stale_history, a fallback forecast) or in the origin's
    future, and the forecasts were stored days away from the loop's."""
    db, tick_at = simulated_store(tmp_path, WallClock().now() + timedelta(days=days))
    run = subprocess.run([*WARM_HEADROOM, "forecast", "run", "--store", f"sqlite:///{db}",
                          "--method", "seasonal_naive", "--state-dir", str(tmp_path / "state"),
                          "--json"], env=_env(), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["computed_at"] == utc_text(tick_at)
    assert report["forecasts"] == 6 and report["fallbacks"] == {}
    assert all(m["warnings"] == [] for m in report["per_model"].values()), report["per_model"]
