"""Fixtures: a store seeded by the real core on the simulated fleet (shared by the session)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from dashboard_support import SEED_HOURS, Gapped, Seeded, seed_store, seed_store_with_a_gap


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


@pytest.fixture(scope="session")
def gapped(tmp_path_factory: pytest.TempPathFactory) -> Gapped:
    """A store with no tick for three days (the control plane was down)."""
    path = tmp_path_factory.mktemp("gapped-store") / "headroom.db"
    return seed_store_with_a_gap(f"sqlite:///{path}", timedelta(days=3),
                                 state_dir=path.parent / "forecaster-state")
