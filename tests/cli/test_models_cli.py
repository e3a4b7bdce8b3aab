"""`headroom models import | list | remove`: the models serve manages, from a models file into
the store (SQLite and PostgreSQL); a bad file is one line naming file, model and field, and
writes nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env

from controlplane.models_file import load_model_specs
from controlplane.serve_k8s import check_models_listed
from controlplane.settings_groups import DbSettings
from controlplane.store import Store

GOOD = (Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml").read_text()


def _models(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, "models", *args], env=_env(HEADROOM_DB__URL=url,
                                                                 COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)


def _sqlite_store_with(tmp_path: Path, models_text: str) -> tuple[str, Path]:
    """A new migrated SQLite store (`headroom db upgrade`) and a models file holding
    ``models_text``, both in ``tmp_path``: the store's URL and the file."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    Store.open(url, migrate=True).engine.dispose()
    models = tmp_path / "models.yaml"
    models.write_text(models_text)
    return url, models


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    url = (f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite"
           else str(request.getfixturevalue("postgres_url")))
    Store.open(url, migrate=True).engine.dispose()  # `headroom db upgrade`
    return url


def test_a_models_file_is_imported_listed_re_imported_and_a_model_removed(
        store_url: str, tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(GOOD)
    imported = _models(store_url, "import", str(models))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(f"imported 2 model(s) from {models}: new llama-3-8b-chat, "
                                      "resnet50; a running serve --backend kubernetes "
                                      "uses them from its next tick")
    store = Store.open(store_url)
    assert store.model_specs() == load_model_specs(models)  # the specs, whole
    check_models_listed(DbSettings(url=store_url))  # serve's start check (kubernetes) passes
    listed = json.loads(_models(store_url, "list", "--json").stdout)
    assert [m["name"] for m in listed] == ["llama-3-8b-chat", "resnet50"]
    assert listed[0]["profile"][0]["compute_slices"] == 3
    assert "llama-3-8b-chat" in _models(store_url, "list").stdout

    models.write_text(GOOD.replace("throughput_rps: 250", "throughput_rps: 300"))
    again = _models(store_url, "import", str(models))
    assert "updated resnet50; unchanged llama-3-8b-chat" in again.stdout, again.stdout
    assert Store.open(store_url).model_specs()[1].profile[0].throughput_rps == 300.0

    removed = _models(store_url, "remove", "resnet50")
    assert removed.returncode == 0 and removed.stdout.startswith("removed model resnet50")
    assert Store.open(store_url).model_names() == ["llama-3-8b-chat"]
    gone = _models(store_url, "remove", "resnet50")
    assert gone.returncode == 2
    assert gone.stderr == ("error: model 'resnet50' is not listed (see `headroom models "
                           "list`)\n")


def test_a_dry_run_says_what_would_change_and_writes_nothing(tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, GOOD)
    run = _models(url, "import", str(models), "--dry-run")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"would import 2 model(s) from {models}: new llama-3-8b-chat")
    assert Store.open(url).model_names() == []


def test_a_file_with_one_impossible_model_is_one_line_and_writes_none_of_them(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, (
        GOOD.replace("{product: T4, throughput_rps: 250",
                     "{product: T4, compute_slices: 2, throughput_rps: 250")))
    run = _models(url, "import", str(models))
    assert run.returncode == 2
    assert run.stderr == (f"error: {models}: models[1] (resnet50): profile.0.compute_slices: "
                          "T4 has no MIG: must be 0 (a whole GPU), got 2\n")
    assert Store.open(url).model_names() == []  # the first, good model was not written either


def test_every_mistake_of_a_models_file_is_its_own_line_and_none_of_it_is_imported(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, (
        GOOD.replace("memory_mib: 20000}", "memory_gb: 20}")
        .replace("engine: triton", "engne: triton")
        .replace("latency_slo_ms: 2000", "latency_slo_ms: -5")))
    run = _models(url, "import", str(models))
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"error: {models}: models[0] (llama-3-8b-chat): latency_slo_ms: Input should be "
        "greater than 0, got -5",
        f"error: {models}: models[0] (llama-3-8b-chat): profile.1.memory_mib: Field required "
        "(the entry has an unknown key 'memory_gb': misspelled?)",
        f"error: {models}: models[1] (resnet50): engine: Field required (the entry has an "
        "unknown key 'engne': misspelled?)"]
    assert Store.open(url).model_names() == []


def test_a_models_file_with_many_mistakes_lists_twenty_and_counts_the_rest(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, (
        "models:\n" + "".join(f"  - {{name: m{i}}}\n" for i in range(6))))
    run = _models(url, "import", str(models))
    assert run.returncode == 2
    lines = run.stderr.splitlines()
    assert len(lines) == 21 and lines[-1].startswith("error: ... and ")
    assert all(line.startswith(f"error: {models}: models[") for line in lines[:20])
    assert Store.open(url).model_names() == []


def test_import_into_a_store_that_was_never_migrated_says_to_upgrade_first(
        tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(GOOD)
    run = _models(f"sqlite:///{tmp_path / 'missing.db'}", "import", str(models))
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.parametrize("store", ["no file", "an empty database"])
def test_listing_a_store_without_a_schema_ends_with_the_upgrade_that_makes_one(
        tmp_path: Path, store: str) -> None:
    path = tmp_path / "new.db"
    if store == "an empty database":
        sqlite3.connect(path).close()
    url = f"sqlite:///{path}"
    run = _models(url, "list")
    assert run.returncode == 2 and run.stdout == ""
    what = ": no such database file" if store == "no file" else " has no Headroom schema"
    advice = "to create it " if store == "no file" else ""
    assert run.stderr == (f"error: store {url}{what} (db.url from environment "
                          f"HEADROOM_DB__URL); run `headroom db upgrade` {advice}(or start "
                          "`headroom demo` with the same db.url)\n")
    assert path.exists() == (store == "an empty database")  # none made


def test_names_that_look_like_rich_markup_are_listed_as_written(tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, (
        GOOD.replace("name: llama-3-8b-chat", "name: 'a[/]b'")
        .replace("tenant: acme", "tenant: '[bold]acme[/bold]'")
        .replace("name: resnet50", "name: '[red]redname[/red]'")))
    assert _models(url, "import", str(models)).returncode == 0
    listed = _models(url, "list")
    assert listed.returncode == 0, listed.stderr  # before: MarkupError, a traceback
    rows = [[cell.strip() for cell in line.split("│")[1:3]]
            for line in listed.stdout.splitlines() if line.startswith("│")]
    assert rows == [["[red]redname[/red]", "default"], ["a[/]b", "[bold]acme[/bold]"]]


def test_a_models_file_nested_600_deep_is_one_line_naming_the_file(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text("models: " + "[" * 600 + "]" * 600 + "\n")
    run = _models(f"sqlite:///{tmp_path / 'store.db'}", "import", str(models))
    assert (run.returncode, run.stderr) == (  # before: a RecursionError traceback, exit 1
        2, f"error: {models}: line 1: invalid YAML (nested deeper than 100 levels)\n")


def _import_with(tmp_path: Path, field: str, written: str
                 ) -> tuple[subprocess.CompletedProcess[str], Path, str]:
    """Import the example file with its first model's ``field`` (name or tenant) written as
    ``written`` into a new store: the run, the file and the store's URL."""
    url, models = _sqlite_store_with(tmp_path, (
        GOOD.replace("name: llama-3-8b-chat" if field == "name" else "tenant: acme",
                     f"{field}: {written}")))
    return _models(url, "import", str(models)), models, url


@pytest.mark.parametrize("field", ["name", "tenant"])
def test_a_name_or_tenant_of_only_whitespace_is_refused_naming_the_field(
        tmp_path: Path, field: str) -> None:
    run, models, url = _import_with(tmp_path, field, "'   '")
    shown = "" if field == "name" else " (llama-3-8b-chat)"
    assert (run.returncode, run.stderr) == (  # before: imported as a model named '   '
        2, f"error: {models}: models[0]{shown}: {field}: must not be empty or only whitespace\n")
    assert Store.open(url).model_names() == []


@pytest.mark.parametrize("field", ["name", "tenant"])
def test_a_name_or_tenant_with_surrounding_whitespace_is_refused_naming_the_field(
        tmp_path: Path, field: str) -> None:
    """' llama' would be a second model beside 'llama', which no metric or hint names."""
    value = "' llama-3-8b-chat'" if field == "name" else "'acme '"
    run, _, url = _import_with(tmp_path, field, value)
    assert run.returncode == 2
    assert run.stderr.endswith(f"{field}: {value} begins or ends with whitespace\n"), run.stderr
    assert Store.open(url).model_names() == []


T4_ONLY = """models:
  - {name: bert-t4, isolation: none, engine: triton, latency_slo_ms: 100,
     cold_start: {p50_s: 5, p90_s: 12},
     profile: [{product: T4, throughput_rps: 250, latency_ms: 30, memory_mib: 2000}]}
"""


def _pools_config(tmp_path: Path, url: str, a100_gpus_per_node: int, more: str = "") -> Path:
    """Settings of the store at ``url`` with an A100-80GB pool of nodes of
    ``a100_gpus_per_node`` GPUs, and the pools ``more`` lists."""
    config = tmp_path / "headroom.yaml"
    config.write_text(f'db: {{url: "{url}"}}\npools:\n'
                      f"  - {{name: a100-80gb, product: A100-80GB, gpus_per_node: "
                      f"{a100_gpus_per_node}, max_nodes: 4, price_per_gpu_hour: 5.12}}\n{more}")
    return config


def test_import_with_the_config_warns_of_a_model_no_pool_offers_a_product_of(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, T4_ONLY)
    config = _pools_config(tmp_path, url, 8, "  - {name: l4, product: L4, gpus_per_node: 4, "
                           "max_nodes: 4, price_per_gpu_hour: 0.8}\n")
    warned = _models(url, "import", str(models), "--config", str(config))
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.split() == (
        f"warning: {models}: model bert-t4: no pool offers a product of its profile (T4; the "
        "pools offer a100-80gb: A100-80GB, l4: L4): the loop cannot place it "
        "(no_pool_for_profile)").split()
    # without --config the pools are the defaults, no fleet's: nothing is said
    quiet = _models(url, "import", str(models))
    assert quiet.returncode == 0 and quiet.stderr == ""


LLAMA_70B_TP4 = """models:
  - {name: llama-70b, isolation: trusted, engine: vllm, latency_slo_ms: 2000,
     cold_start: {p50_s: 60, p90_s: 120},
     profile: [{product: A100-80GB, gpus: 4, throughput_rps: 8, latency_ms: 300,
                memory_mib: 70000}]}
"""


def test_import_with_the_config_warns_of_a_replica_of_more_gpus_than_the_pools_nodes_hold(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, LLAMA_70B_TP4)
    config = _pools_config(tmp_path, url, 2)
    warned = _models(url, "import", str(models), "--config", str(config))
    assert warned.returncode == 0, warned.stderr
    assert warned.stderr.split() == (
        f"warning: {models}: model llama-70b: no pool's nodes hold a whole number of its "
        "replicas (4 GPUs of A100-80GB; GPUs per node of a100-80gb: 2): the loop cannot place "
        "it (replica_larger_than_node)").split()
    _pools_config(tmp_path, url, 8)
    held = _models(url, "import", str(models), "--config", str(config))
    assert held.returncode == 0 and held.stderr == "", held.stderr


def _config(tmp_path: Path, autoscaling: str) -> Path:
    config = tmp_path / "headroom.yaml"
    config.write_text(f"backend: kubernetes\nautoscaling:\n{autoscaling}")
    return config


def test_import_with_the_config_refuses_a_table_serve_would_refuse_and_writes_nothing(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, GOOD)
    config = _config(tmp_path, "  policy: static\n  static_peak_rps: {llama-3-8b-chat: 100}\n")
    refused = (f"error: {config}: serve would refuse the models table with {models} imported: "
               "autoscaling.static_peak_rps: policy static needs the peak rps of every model; "
               "none for 'resnet50'; nothing imported\n")
    for dry_run in ([], ["--dry-run"]):
        run = _models(url, "import", str(models), "-c", str(config), *dry_run)
        # before: exit 0, "serve uses them from its next tick"; serve refused the table
        assert (run.returncode, run.stdout, run.stderr) == (2, "", refused)
        assert Store.open(url).model_names() == []


def test_remove_with_the_config_refuses_leaving_a_table_serve_would_refuse(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, GOOD)
    config = _config(tmp_path, "  tenant_gpu_budgets: {acme: 8}\n")
    assert _models(url, "import", str(models), "-c", str(config)).returncode == 0
    run = _models(url, "remove", "llama-3-8b-chat", "-c", str(config))
    assert (run.returncode, run.stderr) == (2, (
        f"error: {config}: serve would refuse the models table without 'llama-3-8b-chat': "
        "autoscaling.tenant_gpu_budgets: no model belongs to tenant(s) 'acme'; the models' "
        "tenants are 'default'; nothing removed\n"))
    assert Store.open(url).model_names() == ["llama-3-8b-chat", "resnet50"]
    kept = _models(url, "remove", "resnet50", "-c", str(config))  # acme's model stays: served
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.startswith("removed model resnet50; a running serve --backend "
                                  "kubernetes stops managing it at its next tick\n")
    last = _models(url, "remove", "llama-3-8b-chat", "-c", str(config))
    assert last.returncode == 2 and "the store lists no models; nothing removed" in last.stderr


def test_without_the_config_import_and_remove_do_not_promise_serve_uses_the_table(
        tmp_path: Path) -> None:
    url, models = _sqlite_store_with(tmp_path, GOOD)
    unchecked = " unless its settings refuse the new table (--config checks that first)\n"
    imported = _models(url, "import", str(models))
    assert imported.returncode == 0 and imported.stdout.endswith(unchecked), imported.stdout
    removed = _models(url, "remove", "resnet50")
    assert removed.returncode == 0 and removed.stdout.splitlines()[0] + "\n" == (
        "removed model resnet50; a running serve --backend kubernetes stops managing it at "
        "its next tick" + unchecked)
