"""A models table row as an earlier Headroom wrote it, inserted with plain SQL: model ``old`` of
tenant ``acme`` (isolation none, vLLM, 100 ms SLO, cold start 1 / 2 s) with one profile point of
5 rps at 10 ms and 100 MiB per product given, in the JSON of the time (no ``gpus`` key)."""

from __future__ import annotations

import json

from sqlalchemy import Connection, text


def insert_old_model(connection: Connection, *products: str) -> None:
    points = [{"product": product, "compute_slices": 0, "batch_size": 1, "mps_processes": 1,
               "throughput_rps": 5.0, "latency_ms": 10.0, "memory_mib": 100}
              for product in products]
    connection.execute(text(
        "INSERT INTO models (name, tenant, isolation, engine, latency_slo_ms, "
        "cold_start_p50_s, cold_start_p90_s, profile_json) VALUES "
        "('old', 'acme', 'none', 'vllm', 100, 1, 2, :profile)"), {"profile": json.dumps(points)})
