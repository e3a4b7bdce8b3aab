"""The forecast pools of these tests, when they run in a process with other threads (as a
pytest-xdist worker, or a test that starts a server thread), start their workers from
multiprocessing's fork server (``forecast_pool.pool_start_method``). Each such worker would
import the forecaster afresh (about a CPU-second, several seconds a pool on a busy runner); the
fork server imports it once instead, and forks workers that have it. They are as fresh as
before otherwise: the fork server runs no forecast, so no fitted model is in them."""

from __future__ import annotations

import multiprocessing

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # read when the fork server starts: the first pool of the session, after collection
    multiprocessing.set_forkserver_preload(["controlplane.forecast_pool"])
