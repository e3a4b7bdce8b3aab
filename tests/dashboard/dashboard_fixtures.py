"""Fixtures: a store seeded by the real core on the simulated fleet (shared by the session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dashboard_support import SEED_HOURS, Seeded, seed_store


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    path = tmp_path_factory.mktemp("dashboard-store") / "headroom.db"
    url = f"sqlite:///{path}"
    runtime = seed_store(url, SEED_HOURS, state_dir=path.parent / "forecaster-state")
    prices = {p.name: p.price_per_gpu_hour for p in runtime.settings.pools}
    return Seeded(url, runtime.clock.now(), runtime.cluster.gpu_hours,
                  runtime.cluster.cost_usd(prices))


@pytest.fixture(scope="session")
def seeded_url(seeded: Seeded) -> str:
    return seeded.url


@pytest.fixture
def dashboard_env(seeded_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded_url)
    yield seeded_url
