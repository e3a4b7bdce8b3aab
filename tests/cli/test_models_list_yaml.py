"""`headroom models list --yaml`: the store's models as the models file that imports them back,
which `headroom simulate --models` replays too (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

from clihelpers import WARM_HEADROOM, _env

from controlplane.domain.models import ProfilePoint
from controlplane.models_file import load_model_specs
from controlplane.simulation.config import load_models_file
from controlplane.store import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"


def _models(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, "models", *args],  # the table's rows unwrapped
                          env=_env(HEADROOM_DB__URL=url, COLUMNS="300"),
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


def test_a_point_of_several_gpus_is_listed_with_its_gpus_and_imports_back_from_the_yaml(
        store_url: str, tmp_path: Path) -> None:
    store = Store.open(store_url, migrate=True)
    llama, resnet = load_model_specs(EXAMPLE)
    # one replica of 4 whole H100s: the fastest per GPU of llama's points, which it is sized by
    spanning = replace(llama, profile=(
        *llama.profile, ProfilePoint("H100-80GB", 0, 8, 1, 240.0, 600.0, 70000, gpus=4)))
    store.upsert_models([spanning, resnet])
    listed = _models(store_url, "list", "--yaml")
    exported = tmp_path / "exported.yaml"
    exported.write_text(listed.stdout)
    assert load_model_specs(exported) == [spanning, resnet]
    assert [m.shape.gpu_share for m in load_models_file(exported).models] == [4.0, 1.0]
    as_json = json.loads(_models(store_url, "list", "--json").stdout)
    assert [p["gpus"] for p in as_json[0]["profile"]] == [1, 1, 4]
    table = _models(store_url, "list").stdout
    assert "H100-80GB/4 GPUs: 240" in table and "A100-80GB/3: 20" in table
