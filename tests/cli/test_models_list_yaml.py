"""`headroom models list --yaml`: the store's models as the models file that imports them back,
which `headroom simulate --models` replays too (SQLite and PostgreSQL)."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from clihelpers import WARM_HEADROOM, _env

from controlplane.models_file import load_model_specs
from controlplane.simulation.config import load_models_file
from controlplane.store import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"


def _models(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, "models", *args], env=_env(HEADROOM_DB__URL=url),
                          capture_output=True, text=True, timeout=120)


def test_the_listed_yaml_imports_back_as_the_very_models_the_store_holds(
        store_url: str, tmp_path: Path) -> None:
    store = Store.open(store_url, migrate=True)  # `headroom db upgrade`
    specs = load_model_specs(EXAMPLE)
    bounded = replace(specs[0], min_replicas=2, max_replicas=40)  # the optional fields too
    store.upsert_models([bounded, *specs[1:]])
    listed = _models(store_url, "list", "--yaml")
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    exported = tmp_path / "exported.yaml"
    exported.write_text(listed.stdout)
    assert load_model_specs(exported) == store.model_specs() == [bounded, *specs[1:]]
    # and simulate reads it: each model by its profile's best point
    replayed = load_models_file(exported)
    assert [(m.name, m.shape.product, m.shape.per_replica_rps) for m in replayed.models] == [
        ("llama-3-8b-chat", "A100-80GB", 20.0), ("resnet50", "L4", 600.0)]


def test_an_empty_models_table_lists_no_yaml_and_says_so(store_url: str) -> None:
    Store.open(store_url, migrate=True).engine.dispose()
    listed = _models(store_url, "list", "--yaml")
    assert listed.returncode == 0 and listed.stdout == ""
    assert " ".join(listed.stderr.split()) == (
        "warning: no models listed: nothing written (headroom models import FILE)")


def test_json_and_yaml_together_are_a_usage_error(tmp_path: Path) -> None:
    listed = _models(f"sqlite:///{tmp_path / 'store.db'}", "list", "--yaml", "--json")
    assert listed.returncode == 2
    assert "--json and --yaml: give one" in listed.stderr
