"""A profile point of several GPUs (a tensor-parallel replica) in the models table (SQLite and
PostgreSQL): its ``gpus`` round-trips through an import, and a point stored before points had
``gpus`` reads back as one GPU."""

from __future__ import annotations

from dataclasses import replace

from old_model_rows import insert_old_model

from controlplane.domain.models import ProfilePoint
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store

CHAT = DEMO_MODELS[0]
#: 4 whole H100s serving one replica, 70000 MiB on each
TENSOR_PARALLEL = ProfilePoint("H100-80GB", 0, 8, 1, 90.0, 400.0, 70000, gpus=4)


def test_a_point_of_several_gpus_round_trips_through_the_store_with_its_gpus(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    spanning = replace(CHAT, profile=(*CHAT.profile, TENSOR_PARALLEL))
    store.upsert_models([spanning])
    stored, = Store.open(store_url).model_specs()
    assert stored == spanning
    assert stored.profile[-1].gpus == 4 and stored.profile[-1].replica_gpu_share == 4.0


def test_a_point_stored_before_points_had_gpus_reads_back_as_one_gpu(store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    with store.engine.begin() as connection:  # a model imported before: no "gpus" key
        insert_old_model(connection, "L4")
    old, = store.model_specs()
    assert old.profile == (ProfilePoint("L4", 0, 1, 1, 5.0, 10.0, 100, gpus=1),)
    assert old.profile[0].replica_gpu_share == 1.0
