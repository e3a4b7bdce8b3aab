"""Pools named by an alias or a GPU Feature Discovery label serve the demo's models as pools
named by the catalog do. The models' profile points name the catalog's products; before the
settings held the catalog's name, a pool named ``NVIDIA-L4`` matched none of them, and the demo
served nothing (100 % of model-minutes short) while it billed the pools' minimum nodes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from controlplane.demo import Demo
from controlplane.settings import load_settings

START_AT = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
LABELS = {"A100-80GB": "NVIDIA-A100-SXM4-80GB", "H100-80GB": "NVIDIA-H100-80GB-HBM3",
          "L4": "NVIDIA-L4"}


def _served(tmp_path: Path, name: str, by_label: bool) -> tuple[float, float]:
    defaults = load_settings().pools
    pools = [{"name": p.name, "product": LABELS[p.product] if by_label else p.product,
              "gpus_per_node": p.gpus_per_node, "max_nodes": p.max_nodes,
              "price_per_gpu_hour": p.price_per_gpu_hour} for p in defaults]
    db = tmp_path / name / "demo.db"
    db.parent.mkdir()
    demo = Demo(load_settings(db={"url": f"sqlite:///{db}"}, pools=pools,
                              forecast={"state_dir": str(db.parent / "forecaster-state")}),
                START_AT)
    try:
        demo.run_fast(20)
        summary = demo.summary()
    finally:
        demo.shutdown()
    return summary.served_share, summary.gpu_hours


def test_pools_named_by_gfd_labels_serve_the_demo_as_pools_named_by_the_catalog(
        tmp_path: Path) -> None:
    by_name = _served(tmp_path, "names", by_label=False)
    by_label = _served(tmp_path, "labels", by_label=True)
    assert by_name[0] > 0.99
    assert by_label == by_name
