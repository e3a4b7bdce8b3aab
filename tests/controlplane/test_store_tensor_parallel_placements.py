"""A plan's replica of several GPUs (tensor parallel) is stored as one placement row per GPU
with the replica's GPUs and each one's index (migration 0028), so the dashboard draws them as
one replica's GPUs (a row written before the columns reads as a replica of one GPU:
``test_store_upgrade_keeps_rows``)."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import MetaData, Table, select
from tick_builders import sample_tick_report

from controlplane.domain.placement import FleetPlacement, PlacedSegment
from controlplane.store import Store


def _tensor_parallel_placement() -> FleetPlacement:
    ids = tuple(f"H100-80GB/{i}" for i in range(4))
    return FleetPlacement(3, tuple(
        PlacedSegment("llama-70b", gpu, "H100-80GB", "exclusive", "", 0, 0, 2.0, gpus=4,
                      gpu_index=i) for i, gpu in enumerate(ids)),
        (("H100-80GB", ids),), (), 12.0, ())


def _rows(store: Store) -> list[tuple[str, str, int, int]]:
    table = Table("placements", MetaData(), autoload_with=store.engine)
    with store.engine.connect() as connection:
        rows = connection.execute(select(table.c.model, table.c.gpu_id, table.c.gpus,
                                         table.c.gpu_index).order_by(table.c.gpu_id)).all()
    return [tuple(r) for r in rows]


def test_each_gpu_of_a_replica_of_four_is_stored_with_the_replicas_gpus_and_its_index(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    report = sample_tick_report()
    store.save_tick(replace(report, placement=_tensor_parallel_placement()))
    assert _rows(store) == [("llama-70b", f"H100-80GB/{i}", 4, i) for i in range(4)]
    assert _tensor_parallel_placement().replicas_for("llama-70b") == 1

