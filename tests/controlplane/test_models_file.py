"""The models file of `headroom models import`: every field checked, an impossible profile named
by file, model and field before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controlplane.domain.models import ColdStart, Engine, Isolation, ModelSpec, ProfilePoint
from controlplane.models_file import load_model_specs
from controlplane.models_yaml import ModelsFileError
from controlplane.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"
GOOD = EXAMPLE.read_text()


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_the_shipped_example_models_file_reads_as_the_specs_serve_manages() -> None:
    llama, resnet = load_model_specs(EXAMPLE)
    assert llama == ModelSpec(
        "llama-3-8b-chat", "acme", Isolation.STRICT, Engine.VLLM, 2000.0,
        (ProfilePoint("A100-80GB", 3, 8, 1, 20.0, 800.0, 30000),
         ProfilePoint("L4", 0, 1, 1, 8.0, 850.0, 20000)), ColdStart(60.0, 180.0))
    assert resnet.tenant == "default" and resnet.isolation is Isolation.NONE


def test_every_example_model_has_a_profile_on_a_product_of_the_example_configs_pools(
        tmp_path: Path) -> None:
    # the shipped pair (deploy/config.yaml, deploy/examples/models.yaml) can place every model
    config_map = yaml.safe_load((EXAMPLE.parents[1] / "config.yaml").read_text())
    config = tmp_path / "headroom.yaml"
    config.write_text(config_map["data"]["headroom.yaml"])
    products = {pool.product for pool in load_settings(config).pools}
    assert products == {"A100-80GB", "L4"}
    unplaceable = [spec.name for spec in load_model_specs(EXAMPLE)
                   if not {point.product for point in spec.profile} & products]
    assert unplaceable == []


@pytest.mark.parametrize(("old", "new", "named"), [
    ("compute_slices: 3,", "compute_slices: 5,",
     "models[0] (llama-3-8b-chat): profile.0.compute_slices: A100-80GB has no MIG instance of "
     "5 compute slices"),
    ("memory_mib: 30000}", "memory_mib: 50000}",
     "models[0] (llama-3-8b-chat): profile.0.memory_mib: 50000 MiB does not fit a 3g.40gb "
     "instance"),
    ("{product: T4, throughput_rps: 250", "{product: T4, compute_slices: 1, throughput_rps: 250",
     "models[1] (resnet50): profile.0.compute_slices: T4 has no MIG"),
    ("throughput_rps: 250", "throughput_rps: 0",
     "models[1] (resnet50): profile.0.throughput_rps: Input should be greater than 0"),
    ("isolation: none", "isolation: secure", "models[1] (resnet50): isolation: Input should be"),
    ("latency_slo_ms: 100", "latency_slo: 100",
     "models[1] (resnet50): latency_slo_ms: Field required (the entry has an unknown key "
     "'latency_slo': misspelled?)"),
    ("engine: triton", "engne: triton",
     "models[1] (resnet50): engine: Field required (the entry has an unknown key 'engne': "
     "misspelled?)"),
    ("{p50_s: 5, p90_s: 12}", "{p50_s: 12, p90_s: 5}",
     "models[1] (resnet50): cold_start: p90_s (5) < p50_s (12)"),
    ("latency_slo_ms: 100", "latency_slo_ms: 20",
     "models[1] (resnet50): profile: no point's latency_ms is within 0.45 x latency_slo_ms 20 = "
     "9 ms (the fastest is"),
    # within the SLO but not within its 0.45 the fleet plan serves on: never placed
    ("latency_slo_ms: 100", "latency_slo_ms: 40",
     "models[1] (resnet50): profile: no point's latency_ms is within 0.45 x latency_slo_ms 40 = "
     "18 ms"),
    ("batch_size: 8,", "batch_size: true,",
     "models[0] (llama-3-8b-chat): profile.0.batch_size: expected a number, got true"),
    ("{p50_s: 5, p90_s: 12}", "{p50_s: 5, p90_s: \"12\"}",  # before: read as 12
     "models[1] (resnet50): cold_start.p90_s: expected a number, got '12' (quoted: text, not a "
     "number)"),
    ("name: resnet50", "name: llama-3-8b-chat",
     "models: duplicate name(s) ['llama-3-8b-chat']"),
    # strict runs on a MIG instance or a whole GPU alone: its MPS points never serve it
    ("batch_size: 8, throughput_rps: 20,\n         latency_ms: 800, memory_mib: 30000}\n"
     "      - {product: L4, throughput_rps",
     "batch_size: 8, mps_processes: 4, throughput_rps: 20,\n         latency_ms: 800, "
     "memory_mib: 30000}\n      - {product: L4, mps_processes: 2, throughput_rps",
     "models[0] (llama-3-8b-chat): profile: isolation strict runs without MPS, and no point "
     "with mps_processes 1 has latency_ms within 0.45 x latency_slo_ms 2000 = 900 ms: the "
     "fleet plan would never place it"),
    ("batch_size: 8,", "batch_size: 8, mps_processes: 49,",
     "models[0] (llama-3-8b-chat): profile.0.mps_processes: must be at most 48 (CUDA MPS's "
     "client limit per GPU), got 49"),
    # MPS on a MIG instance runs fewer clients: 48 x 3/7 on a 3g of an A100 (the 1g: 6)
    ("batch_size: 8,", "batch_size: 8, mps_processes: 21,",
     "models[0] (llama-3-8b-chat): profile.0.mps_processes: must be at most 20 on a 3g MIG "
     "instance of A100-80GB (CUDA MPS's 48-client limit shrinks with the instance: x 3/7), "
     "got 21"),
    # a GPU older than Volta serves 16 MPS clients, not 48
    ("{product: T4, throughput_rps", "{product: P100, mps_processes: 17, throughput_rps",
     "models[1] (resnet50): profile.0.mps_processes: must be at most 16 on a whole P100 (CUDA "
     "MPS serves 16 clients on a GPU older than Volta), got 17"),
    ("{product: L4,", "{product: L40,",
     "models[0] (llama-3-8b-chat): profile.1.product: unknown GPU product 'L40'; known: "
     "A100-40GB, A100-80GB,"),
    # names as the placement API takes them (scheduler.domain.names)
    ("tenant: acme", 'tenant: "acme\\u202egpj.exe"',
     "models[0] (llama-3-8b-chat): tenant: holds the control character U+202E at 4 (control "
     "and bidirectional characters are refused)"),
    ("name: resnet50", 'name: "resnet50\\x1b[2J"',
     "models[1]: name: holds the control character U+001B at 8"),  # the name not echoed
    ("tenant: acme", "tenant: " + "t" * 101,
     "models[0] (llama-3-8b-chat): tenant: is 101 characters long, at most 100"),
])
def test_an_impossible_model_is_named_by_file_model_and_field(
        tmp_path: Path, old: str, new: str, named: str) -> None:
    assert old in GOOD
    path = _file(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ModelsFileError) as err:
        load_model_specs(path)
    assert str(err.value).startswith(f"{path}: {named}"), str(err.value)


@pytest.mark.parametrize(("point", "named"), [
    ("{product: H200-141GB, compute_slices: 1, memory_mib: 17500",
     "17500 MiB does not fit a 1g.18gb instance (16384 MiB usable)"),
    ("{product: A100-40GB, compute_slices: 1, memory_mib: 5100",
     "5100 MiB does not fit a 1g.5gb instance (4864 MiB usable)"),
    ("{product: H100-80GB, memory_mib: 81500",
     "81500 MiB does not fit a whole H100-80GB (81152 MiB usable)")])
def test_a_point_needing_more_memory_than_cuda_can_use_of_its_shape_is_refused(
        tmp_path: Path, point: str, named: str) -> None:
    # the profile's name overstates its memory (REFERENCE.md §1.3): a 1g.18gb holds 16.00 GiB
    text = GOOD.replace("{product: T4, throughput_rps: 250, latency_ms: 30, memory_mib: 2000}",
                        point + ", throughput_rps: 250, latency_ms: 30}", 1)
    assert text != GOOD
    with pytest.raises(ModelsFileError) as err:
        load_model_specs(_file(tmp_path, text))
    assert f"models[1] (resnet50): profile.0.memory_mib: {named}" in str(err.value)


@pytest.mark.parametrize(("text", "named"), [
    ("models: []\n", "models: List should have at least 1 item"),
    ("- name: x\n", "expected a mapping with 'models'"),
    ("models:\n  - name: a\n    name: b\n", "line 3: invalid YAML"),
])
def test_a_file_that_is_not_a_models_file_says_so(tmp_path: Path, text: str, named: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(ModelsFileError) as err:
        load_model_specs(path)
    assert str(err.value).startswith(f"{path}:") and named in str(err.value), str(err.value)


@pytest.mark.parametrize(("bounds", "named"), [
    ("min_replicas: -1", "models[1] (resnet50): min_replicas: Input should be greater than or "
                         "equal to 0"),
    ("max_replicas: 0", "models[1] (resnet50): max_replicas: Input should be greater than or "
                        "equal to 1"),
    ("min_replicas: 2.5", "models[1] (resnet50): min_replicas: Input should be a valid integer"),
    ("min_replicas: true", "models[1] (resnet50): min_replicas: expected a number, got true"),
    ("min_replicas: '3'", "models[1] (resnet50): min_replicas: expected a number, got '3' "
                          "(quoted: text, not a number)"),  # before: read as 3
    ("{min_replicas: 5, max_replicas: 3}",
     "models[1] (resnet50): max_replicas: 3 is below min_replicas 5"),
])
def test_a_bad_replica_bound_is_named_by_file_model_and_field(
        tmp_path: Path, bounds: str, named: str) -> None:
    lines = "".join(f"    {b.strip()}\n" for b in bounds.strip("{}").split(","))
    path = _file(tmp_path, GOOD.replace("    latency_slo_ms: 100\n",
                                        f"    latency_slo_ms: 100\n{lines}", 1))
    with pytest.raises(ModelsFileError) as err:
        load_model_specs(path)
    assert str(err.value).startswith(f"{path}: {named}"), str(err.value)


def test_replica_bounds_are_read_into_the_spec_and_absent_ones_are_no_bound(
        tmp_path: Path) -> None:
    path = _file(tmp_path, GOOD.replace("    latency_slo_ms: 100\n",
                                        "    latency_slo_ms: 100\n    min_replicas: 0\n"
                                        "    max_replicas: 40\n", 1))
    llama, resnet = load_model_specs(path)
    assert (llama.min_replicas, llama.max_replicas) == (None, None)
    assert (resnet.min_replicas, resnet.max_replicas) == (0, 40)


BAD_TWICE = """models:
  - name: m3
    isolation: none
    engine: triton
    latency_slo_ms: 100
    cold_start: {p50_s: 5, p90_s: 12}
    min_replicas: 5
    max_replicas: 2
    profile:
      - {product: L4, throughput_rps: 0, latency_ms: 20, memory_mib: 200000}
      - {product: T4, compute_slices: 1, throughput_rps: 60, latency_ms: 20, memory_mib: 2000}
  - name: m5
    isolation: nonee
    engine: triton
    latency_slo_ms: 10
    cold_start: {p50_s: 5, p90_s: 12}
    profile:
      - {product: L4, throughput_rps: 600, latency_ms: 20, memory_mib: 2000}
  - name: m3
    isolation: none
"""


def test_every_problem_of_a_models_file_is_listed_in_one_run_whatever_else_is_wrong(
        tmp_path: Path) -> None:
    """A cross-field check runs whenever the fields it reads are valid, and a name two models
    give is named with the models' own problems: one edit mends the file."""
    path = _file(tmp_path, BAD_TWICE)
    with pytest.raises(ModelsFileError) as err:
        load_model_specs(path)
    lines = [line.removeprefix(f"{path}: ") for line in str(err.value).splitlines()]
    assert lines[:5] == [  # before: the slice, bound, SLO and duplicate lines were missing
        "models[0] (m3): profile.0.throughput_rps: Input should be greater than 0, got 0",
        "models[0] (m3): profile.0.memory_mib: 200000 MiB does not fit a whole L4 "
        "(22818 MiB usable)",
        "models[0] (m3): profile.1.compute_slices: T4 has no MIG: must be 0 (a whole GPU), "
        "got 1",
        "models[0] (m3): max_replicas: 2 is below min_replicas 5",
        "models[1] (m5): isolation: Input should be 'strict', 'trusted' or 'none'"]
    assert lines[5].startswith("models[1] (m5): profile: no point's latency_ms is within 0.45 x "
                               "latency_slo_ms 10 = 4.5 ms")
    assert lines[-1] == "models: duplicate name(s) ['m3']"
    assert [line for line in lines if line.startswith("models[2]")] == [
        "models[2] (m3): engine: Field required", "models[2] (m3): latency_slo_ms: Field required",
        "models[2] (m3): cold_start: Field required", "models[2] (m3): profile: Field required"]


def test_an_sglang_model_reads_with_its_engine_and_an_unknown_engine_is_named(
        tmp_path: Path) -> None:
    sglang = GOOD.replace("engine: vllm", "engine: SGLang", 1)
    llama, _ = load_model_specs(_file(tmp_path, sglang))
    assert llama.engine is Engine.SGLANG
    with pytest.raises(ModelsFileError, match=r"llama-3-8b-chat\): engine: Input should be "
                       r"'triton', 'vllm' or 'sglang'"):
        load_model_specs(_file(tmp_path, GOOD.replace("engine: vllm", "engine: tgi", 1)))


# resnet50's first point, to be rewritten as a point of several GPUs
T4_POINT = "{product: T4, throughput_rps: 250, latency_ms: 30, memory_mib: 2000}"


def test_a_point_of_several_gpus_reads_with_its_gpus_and_a_point_without_them_is_one_gpu(
        tmp_path: Path) -> None:
    text = GOOD.replace(T4_POINT, "{product: H100-80GB, gpus: 4, throughput_rps: 900, "
                                  "latency_ms: 30, memory_mib: 70000}", 1)
    llama, resnet = load_model_specs(_file(tmp_path, text))
    assert resnet.profile[0] == ProfilePoint("H100-80GB", 0, 1, 1, 900.0, 30.0, 70000, gpus=4)
    assert resnet.profile[0].replica_gpu_share == 4.0
    assert [p.gpus for p in (*llama.profile, resnet.profile[1])] == [1, 1, 1]


@pytest.mark.parametrize(("point", "named"), [
    ("{product: H100-80GB, gpus: 0,", "profile.0.gpus: Input should be greater than or equal to "
                                      "1, got 0"),
    ("{product: H100-80GB, gpus: 65,", "profile.0.gpus: must be at most 64, the most GPUs a node "
                                       "holds (a replica's GPUs are all on one node), got 65"),
    ("{product: H100-80GB, gpus: true,", "profile.0.gpus: expected a number, got true"),
    ("{product: H100-80GB, compute_slices: 3, gpus: 4,",
     "profile.0.gpus: a replica of 4 GPUs runs on whole GPUs without MPS (compute_slices 0, "
     "mps_processes 1), got compute_slices 3"),
    ("{product: H100-80GB, mps_processes: 2, gpus: 4,",
     "profile.0.gpus: a replica of 4 GPUs runs on whole GPUs without MPS (compute_slices 0, "
     "mps_processes 1), got mps_processes 2"),
])
def test_a_point_of_several_gpus_that_cannot_be_is_refused_naming_the_field(
        tmp_path: Path, point: str, named: str) -> None:
    text = GOOD.replace(T4_POINT, point + " throughput_rps: 900, latency_ms: 30, "
                                          "memory_mib: 2000}", 1)
    path = _file(tmp_path, text)
    with pytest.raises(ModelsFileError) as err:
        load_model_specs(path)
    assert str(err.value) == f"{path}: models[1] (resnet50): {named}"


def test_a_point_of_several_gpus_states_the_memory_of_each_gpu_which_one_gpu_must_hold(
        tmp_path: Path) -> None:
    # 4 x 70000 MiB, the replica's whole memory, would not be refused: each GPU holds its share
    def point(memory_mib: int) -> str:
        return (f"{{product: H100-80GB, gpus: 4, throughput_rps: 900, latency_ms: 30, "
                f"memory_mib: {memory_mib}}}")

    _, resnet = load_model_specs(_file(tmp_path, GOOD.replace(T4_POINT, point(81152), 1)))
    assert (resnet.profile[0].gpus, resnet.profile[0].memory_mib) == (4, 81152)
    path = _file(tmp_path, GOOD.replace(T4_POINT, point(4 * 70000), 1))
    with pytest.raises(ModelsFileError) as err:
        load_model_specs(path)
    assert str(err.value) == (
        f"{path}: models[1] (resnet50): profile.0.memory_mib: 280000 MiB does not fit a whole "
        "H100-80GB (81152 MiB usable): a replica of 4 GPUs states each GPU's memory_mib")
