"""``headroom simulate --models`` reads the models file ``headroom models import`` reads: a model
given by its offline profile replays as the replicas of the point the live loop sizes it by, so
an operator replays a trace against the very file the loop manages."""

from __future__ import annotations

import csv
from pathlib import Path

from simulate_support import START, cli_app, write_models
from typer.testing import CliRunner

from controlplane.models_file import load_model_specs
from controlplane.simulation.config import DEFAULT_PRICES, load_models_file
from controlplane.simulation.engine import fleet_models

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_MODELS = REPO / "deploy" / "examples" / "models.yaml"
FAST = ["--forecast-method", "persistence"]

PROFILED = """\
models:
  - name: chat
    tenant: acme
    isolation: strict
    engine: vllm
    latency_slo_ms: 2000
    cold_start: {p50_s: 60, p90_s: 180}
    profile:
      - {product: A100-80GB, compute_slices: 3, batch_size: 8, throughput_rps: 20,
         latency_ms: 800, memory_mib: 30000}
      - {product: L4, throughput_rps: 8, latency_ms: 850, memory_mib: 20000}
  - name: embed
    isolation: trusted
    engine: triton
    latency_slo_ms: 100
    cold_start: {p50_s: 5, p90_s: 12}
    profile:
      - {product: L4, mps_processes: 4, throughput_rps: 100, latency_ms: 30, memory_mib: 2000}
      - {product: L4, throughput_rps: 60, latency_ms: 20, memory_mib: 2000}
"""

# the same two models, written as the replica shapes of their best points
WRITTEN_OUT = """\
models:
  - name: chat
    tenant: acme
    isolation: STRICT
    latency_slo_ms: 2000
    cold_start: {p50_s: 60, p90_s: 180}
    gpu_product: A100-80GB
    per_replica_rps: 20
    gpu_per_replica: 0.42857142857142855
    latency_ms: 800
  - name: embed
    isolation: TRUSTED
    latency_slo_ms: 100
    cold_start: {p50_s: 5, p90_s: 12}
    gpu_product: L4
    per_replica_rps: 25
    gpu_per_replica: 0.25
    latency_ms: 30
"""


def _trace(path: Path) -> Path:
    lines = ["ts,model,rate_rps"]
    for minute in range(0, 120, 10):
        at = START.replace(minute=minute % 60, hour=minute // 60).strftime("%Y-%m-%d %H:%M:%S")
        lines += [f"{at},chat,{30 + minute / 2}", f"{at},embed,{400 + 3 * minute}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _replay(tmp_path: Path, name: str, models_text: str) -> list[dict[str, str]]:
    models = write_models(tmp_path / f"{name}.yaml", models_text)
    out = tmp_path / f"{name}.csv"
    result = CliRunner().invoke(cli_app(), [
        "--trace", str(_trace(tmp_path / "trace.csv")), "--models", str(models),
        "--timeline-out", str(out), "--policy", "predictive", *FAST])
    assert result.exit_code == 0, result.output
    with out.open() as handle:
        return list(csv.DictReader(handle))


def test_a_model_given_by_its_profile_takes_its_best_points_replica_shape(
        tmp_path: Path) -> None:
    config = load_models_file(write_models(tmp_path / "m.yaml", PROFILED))
    shapes = {m.name: (m.shape.product, m.shape.per_replica_rps, m.shape.gpu_share,
                       m.latency_ms) for m in config.models}
    # chat: the 3g MIG instance serves 20 rps within 0.45 x its SLO, the L4 only 8
    # embed: 4 MPS processes of 100 rps together are replicas of 25 rps on a quarter of a GPU
    assert shapes == {"chat": ("A100-80GB", 20.0, 3 / 7, 800.0),
                      "embed": ("L4", 25.0, 0.25, 30.0)}


def test_a_profile_replays_exactly_as_its_best_point_written_out(tmp_path: Path) -> None:
    profiled = _replay(tmp_path, "profiled", PROFILED)
    written = _replay(tmp_path, "written", WRITTEN_OUT)
    assert len(profiled) == 2 * 120 and profiled == written


def test_the_example_models_file_of_models_import_replays_as_the_loop_sizes_it(
        tmp_path: Path) -> None:
    lines = ["ts,model,rate_rps"] + [
        f"{START.replace(minute=m):%Y-%m-%d %H:%M:%S},{name},{rps}"
        for m in range(0, 60, 10) for name, rps in (("llama-3-8b-chat", 45), ("resnet50", 900))]
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "T.csv"
    result = CliRunner().invoke(cli_app(), [
        "--trace", str(tmp_path / "trace.csv"), "--models", str(EXAMPLE_MODELS),
        "--timeline-out", str(out), *FAST])
    assert result.exit_code == 0, result.output
    with out.open() as handle:
        rows = list(csv.DictReader(handle))
    seen = {(r["model"], r["gpu_product"], float(r["per_replica_rps"]),
             float(r["gpu_per_replica"])) for r in rows}
    specs = load_model_specs(EXAMPLE_MODELS)  # as `headroom models import` reads it
    sized = {(s.name, p.product, p.replica_rps, p.replica_gpu_share)
             for s in specs for p in [s.best_point(DEFAULT_PRICES)]}
    assert seen == sized and len(seen) == 2


def _refused(tmp_path: Path, text: str) -> list[str]:
    models = write_models(tmp_path / "bad.yaml", text)
    result = CliRunner().invoke(cli_app(), [
        "--trace", str(_trace(tmp_path / "trace.csv")), "--models", str(models),
        "--timeline-out", str(tmp_path / "T.csv"), *FAST])
    assert result.exit_code == 2 and not (tmp_path / "T.csv").exists(), result.output
    return [" ".join(line.split()).removeprefix(f"error: {models}: ")
            for line in result.output.strip().splitlines()]


def test_a_model_without_a_shape_or_a_profile_is_refused_naming_each_field(
        tmp_path: Path) -> None:
    text = "models:\n  - name: chat\n    cold_start: {p50_s: 5, p90_s: 10}\n"
    assert _refused(tmp_path, text) == [
        f"models[0] (chat): {field}: required, unless the model gives a profile (as `headroom "
        "models import`'s models file writes it)"
        for field in ("gpu_product", "per_replica_rps", "gpu_per_replica")]


def test_a_shape_given_beside_a_profile_is_refused_rather_than_one_ignored(
        tmp_path: Path) -> None:
    text = PROFILED.replace("    latency_slo_ms: 100\n",
                            "    latency_slo_ms: 100\n    per_replica_rps: 50\n")
    assert _refused(tmp_path, text) == [
        "models[1] (embed): per_replica_rps: given beside a profile: give one or the other"]


def test_an_impossible_profile_is_refused_as_models_import_refuses_it(tmp_path: Path) -> None:
    whole_l4 = "      - {product: L4, throughput_rps: 60, latency_ms: 20, memory_mib: 2000}\n"
    text = (PROFILED.replace("compute_slices: 3,", "compute_slices: 5,")
            .replace("isolation: trusted", "isolation: strict")
            .replace(whole_l4, ""))  # embed: its MPS point alone
    assert _refused(tmp_path, text) == [
        "models[0] (chat): profile.0.compute_slices: A100-80GB has no MIG instance of 5 "
        "compute slices (sizes: [1, 2, 3, 4, 7])",
        "models[1] (embed): profile: isolation strict runs without MPS, and no point with "
        "mps_processes 1 has latency_ms within 0.45 x latency_slo_ms 100 = 45 ms: the fleet "
        "plan would never place it"]


def test_a_profile_with_no_point_within_its_slo_is_refused_as_models_import_refuses_it(
        tmp_path: Path) -> None:
    text = PROFILED.replace("latency_slo_ms: 2000", "latency_slo_ms: 1000")
    assert _refused(tmp_path, text) == [
        "models[0] (chat): profile: no point's latency_ms is within 0.45 x latency_slo_ms 1000 "
        "= 450 ms (the fastest is 800 ms): the fleet plan would never place it"]


# a STRICT model whose best point is one replica of 4 whole H100s: 90 rps a GPU, the A100's
# 3g MIG instance 20 rps a replica
TENSOR_PARALLEL = PROFILED.replace(
    "      - {product: L4, throughput_rps: 8, latency_ms: 850, memory_mib: 20000}\n",
    "      - {product: H100-80GB, gpus: 4, batch_size: 8, throughput_rps: 360, latency_ms: 600,\n"
    "         memory_mib: 70000}\n", 1)


def test_a_profile_point_of_several_gpus_is_a_replica_of_that_many_gpus(tmp_path: Path) -> None:
    assert TENSOR_PARALLEL != PROFILED
    config = load_models_file(write_models(tmp_path / "m.yaml", TENSOR_PARALLEL))
    chat = next(m for m in config.models if m.name == "chat")
    assert (chat.shape.product, chat.shape.per_replica_rps, chat.shape.gpu_share,
            chat.latency_ms) == ("H100-80GB", 360.0, 4.0, 600.0)
    # the policies' spec of it (as the live loop's) is a replica of the same 4 GPUs
    (spec,) = [m.spec for m in fleet_models(config) if m.spec.name == "chat"]
    assert spec.best_point().replica_gpu_share == 4.0


def test_a_profile_point_of_more_gpus_than_a_node_holds_is_refused_naming_the_node(
        tmp_path: Path) -> None:
    text = TENSOR_PARALLEL + "fleet:\n  gpus_per_node: 2\n"
    assert _refused(tmp_path, text) == [
        "models[0] (chat): gpu_per_replica: 4.0 GPUs do not fit a node of fleet.gpus_per_node=2"]
