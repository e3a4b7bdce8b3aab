"""The What-if page and the judge ``../shared/bench/sim_score.py`` read a ``headroom simulate``
timeline to the same short counts as the summary the run printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from dashboard_support import APP, REPO_ROOT
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from controlplane.cli.simulate import simulate_command

JUDGE = REPO_ROOT.parent / "shared" / "bench" / "sim_score.py"
FLEET = "fleet:\n  node_provision_s: {p50: 120, p90: 240}\n  gpus_per_node: 8\n"


def _model(name: str, product: str, per_replica_rps: float, gpu_per_replica: float) -> str:
    return (f"  - name: {name}\n    gpu_product: {product}\n"
            f"    per_replica_rps: {per_replica_rps!r}\n    gpu_per_replica: {gpu_per_replica}\n"
            "    isolation: TRUSTED\n    cold_start: {p50_s: 20, p90_s: 40}\n")


def _simulate(tmp_path: Path, models_yaml: str, demand_rps: dict[str, float],
              minutes: int = 30) -> tuple[Path, dict[str, Any]]:
    """Replay a constant demand per model under the static policy: the timeline and the
    summary the run printed (``--json``, also written beside the timeline)."""
    trace = tmp_path / "trace.csv"
    trace.write_text("ts,model,rate_rps\n" + "".join(
        f"2026-12-03T08:{minute:02d}:00Z,{model},{rps}\n"
        for minute in range(minutes) for model, rps in demand_rps.items()))
    models = tmp_path / "models.yaml"
    models.write_text(models_yaml)
    timeline = tmp_path / "runs" / "static.csv"
    app = typer.Typer()
    app.command()(simulate_command)
    done = CliRunner().invoke(app, ["--trace", str(trace), "--models", str(models),
                                    "--policy", "static", "--timeline-out", str(timeline),
                                    "--forecast-method", "persistence", "--json"])
    assert done.exit_code == 0, done.output
    document: dict[str, Any] = json.loads(done.stdout)
    (timeline.parent / "static.json").write_text(done.stdout)
    return timeline, document["policies"]["static"]


def _judged(timeline: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(JUDGE), "--timeline", str(timeline)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    scores: dict[str, Any] = json.loads(done.stdout)["policies"][timeline.stem]
    return scores


def _what_if(paths: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AppTest:
    monkeypatch.setenv("HEADROOM_DB__URL", f"sqlite:///{tmp_path / 'none.db'}")  # list prices
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("views/whatif.py").run()
    at.text_area[0].set_value(paths).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_throughput_of_a_third_read_back_from_the_timeline_is_short_exactly_when_the_run_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 replicas x 40/3 rps serve 40 rps exactly; written as 13.3333 they read back as 39.9999
    timeline, summary = _simulate(
        tmp_path, "models:\n" + _model("m", "A100-80GB", 40 / 3, 0.4286) + FLEET, {"m": 40.0})
    assert (summary["short_model_minutes"], summary["minutes_any_short"]) == (0, 0)
    judged = _judged(timeline)
    assert (judged["short_model_minutes"], judged["minutes_any_short"]) == (0, 0)
    shown = _what_if(str(timeline), monkeypatch, tmp_path).dataframe[0].value.set_index("policy")
    assert (shown.loc["static", "short model-minutes"], shown.loc["static", "short minutes"]) \
        == (0, 0)


MIXED = ("models:\n" + _model("big", "A100-80GB", 40.0, 1.0) + _model("small", "L4", 10.0, 1.0)
         + FLEET)
MIXED_DEMAND_RPS = {"big": 100.0, "small": 300.0}  # 3 A100s (a node of 8) + 30 L4s (4 nodes)
MIXED_USD = 8 * 5.12 + 32 * 0.80  # an hour at the list prices


def test_a_run_on_two_gpu_products_costs_on_the_page_what_its_summary_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline, summary = _simulate(tmp_path, MIXED, MIXED_DEMAND_RPS, minutes=60)
    assert summary["cost_usd"] == pytest.approx(round(MIXED_USD, 2))
    assert summary["gpu_hours_by_product"] == {"A100-80GB": 8.0, "L4": 32.0}
    at = _what_if(f"{timeline}\n{timeline.with_suffix('.json')}", monkeypatch, tmp_path)
    shown = at.dataframe[0].value.set_index("policy")
    assert shown.loc["static", "$"] == pytest.approx(summary["cost_usd"])
    assert shown.loc["static", "summary cost_usd"] == pytest.approx(summary["cost_usd"])
    assert shown.loc["static", "priced"] == "per product"
    assert [w.value for w in at.warning] == []


def test_a_product_price_edited_on_the_page_reprices_its_gpu_hours_and_warns_of_the_difference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline, summary = _simulate(tmp_path, MIXED, MIXED_DEMAND_RPS, minutes=60)
    at = _what_if(f"{timeline}\n{timeline.with_suffix('.json')}", monkeypatch, tmp_path)
    at.number_input(key="usd-per-gpu-hour-L4").set_value(1.0).run()
    shown = at.dataframe[0].value.set_index("policy")
    assert shown.loc["static", "$"] == pytest.approx(round(8 * 5.12 + 32 * 1.0, 2))
    assert len(at.warning) == 1
    assert at.warning[0].value.startswith(
        "Policy static: the page's \\$72.96 differs from the run's summary cost\\_usd "
        f"\\${summary['cost_usd']}")


def test_the_timeline_names_each_rows_product_and_the_judge_reads_it_as_before(
        tmp_path: Path) -> None:
    timeline, summary = _simulate(tmp_path, MIXED, MIXED_DEMAND_RPS, minutes=60)
    header, first, second = timeline.read_text().splitlines()[:3]
    assert header.endswith(",gpus_billed,gpu_product,product_gpus_billed")
    assert (first.split(",")[1:], second.split(",")[1:]) == (
        ["big", "100", "3", "40", "1", "40", "A100-80GB", "8"],
        ["small", "300", "30", "10", "1", "40", "L4", "32"])
    judged = _judged(timeline)
    assert judged["gpu_hours"] == pytest.approx(summary["gpu_hours"])
    assert judged["short_model_minutes"] == summary["short_model_minutes"] == 0


def test_a_timeline_without_the_product_column_still_loads_priced_at_one_price_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "old.csv"
    old.write_text("minute,model,demand_rps,ready_replicas,per_replica_rps,gpu_per_replica,"
                   "gpus_billed\n" + "".join(f"{m},big,100,3,40,1,40\n{m},small,300,30,10,1,40\n"
                                             for m in range(60)))
    at = _what_if(str(old), monkeypatch, tmp_path)
    assert [e.value for e in at.error] == []
    shown = at.dataframe[0].value.set_index("policy")
    assert shown.loc["old", "$"] == pytest.approx(40 * 5.12)  # every GPU-hour at A100's
    assert shown.loc["old", "priced"] == "one price"
    assert any("no gpu_product column" in c.value for c in at.caption)
