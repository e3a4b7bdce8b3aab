"""``headroom simulate``'s node pools: one per GPU product, its node size and bounds from the
models file's ``fleet.pools`` or from ``--config``'s ``pools`` (serve's own), so a replay runs on
the fleet's node shapes, limits and prices; impossible pools refused, naming file and key."""

from __future__ import annotations

import csv
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from simulate_support import ONE_MODEL_YAML, START, cli_app, write_models, write_trace
from typer.testing import CliRunner, Result

FAST = ["--forecast-method", "persistence"]


def _flat_trace(path: Path, rate_rps: float, steps: int = 6) -> Path:
    rows = ["ts,model,rate_rps"] + [
        f"{(START + timedelta(minutes=10 * i)):%Y-%m-%d %H:%M:%S},chat/large,{rate_rps}"
        for i in range(steps)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _run(tmp_path: Path, models_text: str, trace: Path, *args: str) -> Result:
    models = write_models(tmp_path / "models.yaml", models_text)
    return CliRunner().invoke(cli_app(), ["--trace", str(trace), "--models", str(models),
                                          "--timeline-out", str(tmp_path / "t.csv"), *FAST,
                                          *args])


def _billed(path: Path) -> list[float]:
    with path.open() as handle:
        return [float(row["gpus_billed"]) for row in csv.DictReader(handle)]


def _pool(text: str) -> str:
    return ONE_MODEL_YAML + "  pools:\n    A100-80GB: " + text + "\n"


def test_a_products_pool_caps_its_gpus_at_max_nodes_of_its_own_node_size(tmp_path: Path
                                                                          ) -> None:
    trace = write_trace(tmp_path / "trace.csv", steps=6, models=("chat/large",))
    result = _run(tmp_path, _pool("{gpus_per_node: 4, max_nodes: 3}"), trace, "--json")
    assert result.exit_code == 0, result.output
    billed = _billed(tmp_path / "t.csv")
    assert max(billed) == 12  # 3 nodes of 4 GPUs, where the demand wants 30 and more
    summary = json.loads(result.stdout)["policies"]["predictive"]
    assert summary["short_model_minutes"] == len(billed)  # 24 rps of 48 and more, every minute
    pools = json.loads(result.stdout)["pools"]
    assert pools == [{"name": "a100-80gb", "product": "A100-80GB", "gpus_per_node": 4,
                      "min_nodes": 0, "max_nodes": 3, "usd_per_gpu_hour": 5.12,
                      "from": "models_file"}]


def test_a_pools_min_nodes_bill_its_floor_while_demand_wants_less(tmp_path: Path) -> None:
    trace = _flat_trace(tmp_path / "trace.csv", 1.0)  # one replica, one GPU
    result = _run(tmp_path, _pool("{gpus_per_node: 2, min_nodes: 3}"), trace)
    assert result.exit_code == 0, result.output
    assert set(_billed(tmp_path / "t.csv")) == {6.0}
    result = _run(tmp_path, _pool("{gpus_per_node: 2}"), trace)
    assert result.exit_code == 0, result.output
    assert min(_billed(tmp_path / "t.csv")) == 2.0  # without the floor: one node at times


@pytest.mark.parametrize(("models_text", "message"), [
    (ONE_MODEL_YAML.replace("gpu_per_replica: 1.0", "gpu_per_replica: 8")
     + "  pools:\n    A100-80GB: {gpus_per_node: 4}\n",
     "models[0] (chat/large): gpu_per_replica: 8.0 GPUs do not fit a node of "
     "fleet.pools.A100-80GB.gpus_per_node=4"),
    (_pool("{min_nodes: 3, max_nodes: 2}"), "fleet.pools.A100-80GB: min_nodes 3 > max_nodes 2"),
    (_pool("{min_nodes: 3}").replace("gpus_per_node: 8", "gpus_per_node: 8\n  max_nodes: 2"),
     "fleet: pools.A100-80GB: min_nodes 3 > fleet.max_nodes 2"),
    (_pool("{gpus_per_node: 4}").replace("A100-80GB: {", "H100-80GB: {"),
     "fleet.pools.H100-80GB: no model runs on 'H100-80GB'; the models' GPU products are "
     "'A100-80GB'"),
], ids=["a replica wider than the node", "min above max", "min above the fleet's max",
        "a pool of a product no model runs on"])
def test_an_impossible_pool_is_refused_naming_the_file_and_key(
        tmp_path: Path, models_text: str, message: str) -> None:
    result = _run(tmp_path, models_text, _flat_trace(tmp_path / "trace.csv", 1.0))
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'models.yaml'}: " in result.output
    assert message in " ".join(result.output.split())


def test_a_misspelt_key_of_a_pool_is_a_warning_naming_the_key_it_is_close_to(
        tmp_path: Path) -> None:
    result = _run(tmp_path, _pool("{gpus_per_nodes: 4}"),
                  _flat_trace(tmp_path / "trace.csv", 1.0))
    assert result.exit_code == 0, result.output
    assert ("fleet.pools.A100-80GB.gpus_per_nodes: unknown key, ignored; did you mean "
            "gpus_per_node?") in " ".join(result.stderr.split())


SERVE_POOLS = """\
pools:
  - {name: a100-spot, product: A100-80GB, gpus_per_node: 2, max_nodes: 5,
     price_per_gpu_hour: 1.5}
  - {name: l4, product: L4, gpus_per_node: 4, max_nodes: 8, price_per_gpu_hour: 0.8}
"""


def test_the_configs_pools_replace_the_models_files_fleet_with_their_shapes_and_prices(
        tmp_path: Path) -> None:
    (tmp_path / "serve.yaml").write_text(SERVE_POOLS)
    trace = write_trace(tmp_path / "trace.csv", steps=6, models=("chat/large",))
    result = _run(tmp_path, _pool("{gpus_per_node: 4, max_nodes: 3}"), trace, "--json",
                  "--config", str(tmp_path / "serve.yaml"))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["pools"] == [{"name": "a100-spot", "product": "A100-80GB", "gpus_per_node": 2,
                             "min_nodes": 0, "max_nodes": 5, "usd_per_gpu_hour": 1.5,
                             "from": "config"}]
    assert max(_billed(tmp_path / "t.csv")) == 10
    summary = doc["policies"]["predictive"]
    assert summary["cost_usd"] == round(summary["gpu_hours"] * 1.5, 2)
    ignored = re.search(r"ignores the settings (.*?) \(", " ".join(result.stderr.split()))
    assert ignored is None or "pools" not in ignored.group(1).split(", ")  # honoured


def test_config_pools_a_model_cannot_run_on_are_refused_naming_the_pool(tmp_path: Path
                                                                        ) -> None:
    trace = _flat_trace(tmp_path / "trace.csv", 1.0)
    serve = tmp_path / "serve.yaml"
    cases = [
        ("pools:\n  - {name: l4, product: L4, price_per_gpu_hour: 0.8}\n", ONE_MODEL_YAML,
         f"{serve}: pools: no pool of A100-80GB, the GPU product of model 'chat/large' in "
         f"{tmp_path / 'models.yaml'}; the pools' products are L4"),
        (SERVE_POOLS, ONE_MODEL_YAML.replace("gpu_per_replica: 1.0", "gpu_per_replica: 4"),
         f"{serve}: pools: a100-spot: a node of gpus_per_node=2 cannot hold a replica of "
         "model 'chat/large', 4 GPUs"),
    ]
    for settings, models_text, message in cases:
        serve.write_text(settings)
        result = _run(tmp_path, models_text, trace, "--config", str(serve))
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split())


PROFILED = """\
models:
  - name: chat/large
    isolation: trusted
    latency_slo_ms: 2000
    cold_start: {p50_s: 60, p90_s: 180}
    profile:
      - {product: H100-80GB, throughput_rps: 30, latency_ms: 500, memory_mib: 30000}
      - {product: A100-80GB, throughput_rps: 20, latency_ms: 800, memory_mib: 30000}
"""


def test_a_profile_is_sized_on_the_configs_pools_as_the_live_loop_sizes_it(tmp_path: Path
                                                                           ) -> None:
    trace = _flat_trace(tmp_path / "trace.csv", 40.0)
    result = _run(tmp_path, PROFILED, trace, "--json")
    assert result.exit_code == 0, result.output
    assert [p["product"] for p in json.loads(result.stdout)["pools"]] == ["H100-80GB"]
    (tmp_path / "serve.yaml").write_text(SERVE_POOLS)  # A100-80GB and L4: no H100
    result = _run(tmp_path, PROFILED, trace, "--json", "--config", str(tmp_path / "serve.yaml"))
    assert result.exit_code == 0, result.output
    assert [p["name"] for p in json.loads(result.stdout)["pools"]] == ["a100-spot"]
    with (tmp_path / "t.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["gpu_product"], r["per_replica_rps"]) for r in rows} == {("A100-80GB", "20")}
