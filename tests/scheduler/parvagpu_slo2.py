"""The ParvaGPU (SC'24) SLO2 scenario as a PlanFleet request: eleven models on A100-80GB.

Rates, latency SLOs and profile rows come from ParvaGPU's data (MIT licence, (c) 2024
sslab6943; ``../shared/data/packing/parvagpu``: scenarios.csv and a100_80gb_profiles.csv). Of
each model's measured rows only the one PlanFleet uses per MIG size is kept: the most
throughput among rows with latency <= 0.45 x the SLO. A row is (compute slices, batch, MPS
processes, requests/s per process as in the CSV, latency ms); a segment serves the per-process
rate x the processes, as the benchmark's judge (parvagpu_check.py) sends it.
"""

from __future__ import annotations

from protos.headroom.v1 import placement_pb2 as pb
from scheduler.domain.fleet_types import FleetRequest, GpuPool, ModelDemand, ProfilePoint
from scheduler.domain.model import Isolation

PRODUCT = "A100-80GB"
Row = tuple[int, int, int, float, float]

SLO2: tuple[tuple[str, float, float, tuple[Row, ...]], ...] = (
    ("bert", 19.0, 6434.0, (
        (1, 128, 3, 61.192, 2092.0),
        (2, 128, 4, 87.948, 1455.0),
        (3, 256, 3, 181.67, 1409.0),
        (4, 128, 5, 125.28, 1022.0),
        (7, 256, 5, 168.751, 1517.0),
    )),
    ("densenet121", 353.0, 183.0, (
        (1, 16, 1, 322.621, 50.0),
        (2, 16, 3, 222.972, 72.0),
        (3, 16, 3, 379.507, 42.0),
        (4, 16, 3, 428.687, 37.0),
        (7, 16, 3, 735.463, 22.0),
    )),
    ("densenet169", 308.0, 216.5, (
        (1, 16, 1, 256.489, 62.0),
        (2, 16, 3, 175.424, 91.0),
        (3, 128, 1, 1460.726, 88.0),
        (4, 128, 1, 1619.344, 79.0),
        (7, 128, 2, 1753.764, 73.0),
    )),
    ("densenet201", 276.0, 168.5, (
        (1, 8, 1, 186.284, 43.0),
        (2, 16, 2, 211.938, 75.0),
        (3, 16, 3, 233.131, 69.0),
        (4, 16, 3, 274.106, 58.0),
        (7, 16, 5, 281.488, 57.0),
    )),
    ("inceptionv3", 460.0, 418.5, (
        (1, 64, 1, 583.922, 110.0),
        (2, 8, 5, 248.98, 32.0),
        (3, 64, 5, 400.375, 160.0),
        (4, 128, 2, 1141.121, 112.0),
        (7, 32, 5, 763.04, 42.0),
    )),
    ("mobilenetv2", 677.0, 167.0, (
        (1, 4, 2, 385.576, 10.0),
        (2, 16, 2, 786.347, 20.0),
        (3, 8, 3, 900.879, 9.0),
        (4, 64, 4, 904.676, 71.0),
        (7, 8, 5, 1000.12, 8.0),
    )),
    ("resnet101", 393.0, 211.5, (
        (1, 16, 1, 253.003, 63.0),
        (2, 32, 1, 516.1, 62.0),
        (3, 32, 2, 451.216, 71.0),
        (4, 32, 2, 529.82, 60.0),
        (7, 64, 2, 925.526, 69.0),
    )),
    ("resnet152", 281.0, 212.5, (
        (1, 16, 1, 183.615, 87.0),
        (2, 16, 2, 190.879, 84.0),
        (3, 32, 2, 339.007, 94.0),
        (4, 32, 2, 384.052, 83.0),
        (7, 32, 3, 432.982, 74.0),
    )),
    ("resnet50", 829.0, 204.5, (
        (1, 32, 1, 412.097, 78.0),
        (2, 32, 2, 409.92, 78.0),
        (3, 64, 2, 711.267, 90.0),
        (4, 64, 2, 810.12, 79.0),
        (7, 128, 2, 1398.072, 92.0),
    )),
    ("vgg16", 410.0, 399.5, (
        (1, 32, 1, 261.971, 122.0),
        (2, 32, 2, 266.392, 120.0),
        (3, 64, 2, 423.228, 151.0),
        (4, 64, 2, 513.496, 125.0),
        (7, 16, 5, 354.728, 45.0),
    )),
    ("vgg19", 354.0, 396.5, (
        (1, 32, 1, 224.591, 142.0),
        (2, 32, 2, 224.453, 143.0),
        (3, 64, 2, 377.437, 170.0),
        (4, 32, 2, 458.161, 70.0),
        (7, 16, 2, 765.742, 21.0),
    )),
)


def _points(rows: tuple[Row, ...]) -> tuple[ProfilePoint, ...]:
    return tuple(ProfilePoint(PRODUCT, g, batch, mps, per_process * mps, latency)
                 for g, batch, mps, per_process, latency in rows)


def slo2_request(rate_factor: dict[str, float] | None = None) -> FleetRequest:
    """The scenario (rates scaled per model by ``rate_factor``), one pool of 1000 GPUs."""
    factor = rate_factor or {}
    return FleetRequest(
        tuple(ModelDemand(model, "t", Isolation.TRUSTED, rate * factor.get(model, 1.0), slo,
                          _points(rows)) for model, rate, slo, rows in SLO2),
        (GpuPool(PRODUCT, 1000, 4.0),))


def slo2_pb_request() -> pb.PlanFleetRequest:
    """The scenario as the benchmark's judge sends it over gRPC."""
    return pb.PlanFleetRequest(
        models=[pb.ModelDemand(model=model, tenant="t", isolation=pb.TRUSTED, rate_rps=rate,
                               latency_slo_ms=slo, profile=[
                                   pb.ProfilePoint(product=p.product,
                                                   compute_slices=p.compute_slices,
                                                   batch_size=p.batch_size,
                                                   mps_processes=p.mps_processes,
                                                   throughput_rps=p.throughput_rps,
                                                   latency_ms=p.latency_ms)
                                   for p in _points(rows)])
                for model, rate, slo, rows in SLO2],
        pools=[pb.GpuPool(product=PRODUCT, max_gpus=1000, price_per_gpu_hour=4.0)])
