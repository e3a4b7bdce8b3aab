"""`headroom demo` and `serve --backend sim` refuse a real fleet's store (one that lists models
the simulated fleet does not run) and a setting they can refuse from the settings alone, before
they write anything: every row of every table, the `sim-fleet` lease's too, stays as it was."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from clihelpers import HEADROOM, _env
from sqlalchemy import inspect, select, table

from controlplane.adapters.clock import WallClock
from controlplane.demo import Demo
from controlplane.domain.hints import DemandHint
from controlplane.models_file import load_model_specs
from controlplane.settings import ConfigError, load_settings
from controlplane.store import Store, StoreUnavailable
from controlplane.store.hints import SqlDemandHints

MODELS = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"


def _real_fleets_store(tmp_path: Path) -> str:
    """`headroom db upgrade`, `models import` of the example (resnet50 is no demo model) and
    a hint."""
    url = f"sqlite:///{tmp_path / 'real.db'}"
    store = Store.open(url, migrate=True)
    try:
        store.upsert_models(load_model_specs(MODELS))
        now = WallClock().now()
        SqlDemandHints(store.engine).add_hint(DemandHint(
            "llama-3-8b-chat", 100.0, now, now + timedelta(hours=1)), now)
    finally:
        store.engine.dispose()
    return url


def _rows(url: str) -> dict[str, list[str]]:
    """Every row of every table, as text, sorted."""
    store = Store.open(url)
    try:
        with store.engine.connect() as connection:
            return {name: sorted(repr(tuple(row)) for row in connection.execute(
                        select("*").select_from(table(name))))
                    for name in inspect(store.engine).get_table_names()}
    finally:
        store.engine.dispose()


def _serve_config(tmp_path: Path, url: str, extra: str = "") -> Path:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"backend: sim\ndb:\n  url: {url}\nsim:\n  history_s: 3600\n{extra}")
    return config


def test_a_demo_on_a_real_fleets_store_is_refused_before_it_takes_the_lease_or_writes_a_row(
        tmp_path: Path) -> None:
    url = _real_fleets_store(tmp_path)
    before = _rows(url)
    assert before["models"] and before["demand_hints"] and not before["leases"]
    done = subprocess.run([*HEADROOM, "demo", "--minutes", "5", "--no-dashboard", "--json"],
                          cwd=tmp_path, env=_env(HEADROOM_DB__URL=url), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert "lists models the simulated fleet does not run (resnet50)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert _rows(url) == before  # no sim-fleet lease row, model, price or observation
    assert not (tmp_path / ".headroom").exists()  # nor its log file


def test_a_sim_serve_on_a_real_fleets_store_is_refused_before_it_takes_the_lease_or_writes(
        tmp_path: Path) -> None:
    url = _real_fleets_store(tmp_path)
    before = _rows(url)
    done = subprocess.run([*HEADROOM, "serve", "--config", str(_serve_config(tmp_path, url))],
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: store ") and done.stderr.count("\n") == 1
    assert "lists models the simulated fleet does not run (resnet50)" in done.stderr
    assert _rows(url) == before


def test_a_demo_made_in_process_on_a_real_fleets_store_raises_and_leaves_it_as_it_was(
        tmp_path: Path) -> None:
    url = _real_fleets_store(tmp_path)
    before = _rows(url)
    settings = load_settings(db={"url": url},
                             forecast={"state_dir": str(tmp_path / "state")})
    with pytest.raises(StoreUnavailable, match=r"does not run \(resnet50\)"):
        Demo(settings, WallClock().now())
    assert _rows(url) == before


def test_a_true_throughput_factor_for_no_demo_model_is_refused_before_the_store_is_written(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    Store.open(url, migrate=True).engine.dispose()
    before = _rows(url)
    settings = load_settings(db={"url": url}, forecast={"state_dir": str(tmp_path / "state")},
                             sim={"history_s": 3600, "true_throughput_factor": {"resnet50": 0.8}})
    with pytest.raises(ConfigError, match=r"sim\.true_throughput_factor: no model 'resnet50'"):
        Demo(settings, WallClock().now())
    assert _rows(url) == before  # no demo models, prices, history or lease
