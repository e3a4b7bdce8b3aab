"""`headroom demo` and `serve --backend sim` refuse a real fleet's store (one that lists models
the simulated fleet does not run) and a setting they can refuse from the settings alone, before
they write anything: every row of every table, the `sim-fleet` lease's too, stays as it was."""

from __future__ import annotations

import shlex
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from clihelpers import WARM_HEADROOM, _env, only_failure_document, simulated_store
from sqlalchemy import inspect, select, table

from controlplane.adapters.clock import WallClock
from controlplane.demo import Demo
from controlplane.domain.hints import DemandHint
from controlplane.domain.lease import released
from controlplane.fleet_lease import FLEET_LEASE
from controlplane.models_file import load_model_specs
from controlplane.settings import ConfigError, load_settings
from controlplane.store import Store, StoreUnavailable
from controlplane.store.hints import SqlDemandHints
from controlplane.store.lease import SqlLeaseStore

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
    done = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "5", "--no-dashboard", "--json"],
                          cwd=tmp_path, env=_env(HEADROOM_DB__URL=url), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and only_failure_document(done)
    assert "lists models the simulated fleet does not run (resnet50)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert _rows(url) == before  # no sim-fleet lease row, model, price or observation
    assert not (tmp_path / ".headroom").exists()  # nor its log file


def test_a_sim_serve_on_a_real_fleets_store_is_refused_before_it_takes_the_lease_or_writes(
        tmp_path: Path) -> None:
    url = _real_fleets_store(tmp_path)
    before = _rows(url)
    done = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(_serve_config(tmp_path, url))],
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


def _headroom(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, *args], cwd=tmp_path, env=_env(COLUMNS="400"),
                          capture_output=True, text=True, timeout=120)


def test_a_demo_refusing_a_store_an_other_model_was_imported_into_names_the_remove_that_mends_it(
        tmp_path: Path) -> None:
    path, _ = simulated_store(tmp_path, WallClock().now())  # a demo's store, its lease too
    store = Store.open(f"sqlite:///{path}")
    try:  # resnet50 imported into it, as `models import` did before it refused one
        store.upsert_models([s for s in load_model_specs(MODELS) if s.name == "resnet50"])
        # the demo that made it stopped cleanly (its lease released), so the demo started once
        # the store is mended takes the lease at once instead of waiting out a live-looking one
        leases = SqlLeaseStore(store.engine)
        held = leases.read_lease(FLEET_LEASE)
        assert held is not None and held.renew_at is not None
        assert leases.replace_lease(FLEET_LEASE, released(held, held.renew_at))
    finally:
        store.engine.dispose()
    refused = _headroom(tmp_path, "demo", "--db", str(path), "--minutes", "0", "--no-dashboard")
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.replace("\n", "")
    named = f"`headroom models remove resnet50 --db {shlex.quote(str(path))}`"
    assert named in line, line
    removed = _headroom(tmp_path, *shlex.split(named.strip("`"))[1:])
    assert removed.returncode == 0, removed.stderr
    started = _headroom(tmp_path, "demo", "--db", str(path), "--minutes", "0", "--no-dashboard")
    assert started.returncode == 0, started.stderr


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["import", "dry run"])
def test_models_import_into_a_demos_store_refuses_a_model_the_demo_does_not_run_writing_nothing(
        tmp_path: Path, dry_run: list[str]) -> None:
    path, _ = simulated_store(tmp_path, WallClock().now())
    before = _rows(f"sqlite:///{path}")
    done = _headroom(tmp_path, "models", "import", str(MODELS), "--db", str(path), *dry_run)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(
        f"error: {MODELS} lists models the simulated fleet does not run (resnet50) and store "
        f"sqlite:///{path} is a simulated fleet's (`headroom demo`, `serve --backend sim`), "
        "whose next start would refuse a store listing them: nothing imported. Import them "
        "into a real fleet's store (--db, or db.url)"), done.stderr
    assert done.stderr.count("\n") == 1
    assert _rows(f"sqlite:///{path}") == before  # llama-3-8b-chat's update not written either


def test_models_import_and_remove_on_a_demos_store_name_the_demo_as_what_uses_the_table(
        tmp_path: Path) -> None:
    path, _ = simulated_store(tmp_path, WallClock().now())
    example = yaml.safe_load(MODELS.read_text())
    example["models"] = [m for m in example["models"] if m["name"] == "llama-3-8b-chat"]
    demo_only = tmp_path / "llama.yaml"
    demo_only.write_text(yaml.safe_dump(example))
    imported = _headroom(tmp_path, "models", "import", str(demo_only), "--db", str(path))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(
        f"imported 1 model(s) from {demo_only}: updated llama-3-8b-chat; a running `headroom "
        "demo` or serve --backend sim on this store uses them from its next tick"), \
        imported.stdout
    removed = _headroom(tmp_path, "models", "remove", "bert-embed", "--db", str(path))
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith(
        "removed model bert-embed; a running `headroom demo` or serve --backend sim on this "
        "store stops managing it at its next tick"), removed.stdout
