"""`headroom trace replay`: the loop's own demand replayed through `headroom simulate` with
serve's settings and pools, scored beside what the loop did over the same model-minutes
(SQLite and PostgreSQL); the inputs it writes re-run in simulate to the same timeline."""

from __future__ import annotations

import json
import shlex
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from clihelpers import demo_on_store
from clihelpers import headroom_on_store as _headroom

from controlplane.models_file import load_model_specs
from controlplane.settings import load_settings
from controlplane.settings_groups import default_pools
from controlplane.simulation.timeline import read_timeline
from controlplane.store import Store

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"


def test_the_demos_minutes_replay_beside_the_recorded_ones_from_inputs_simulate_reruns(
        store_url: str, tmp_path: Path) -> None:
    demo = demo_on_store(store_url, tmp_path)
    out = tmp_path / "replay"
    done = _headroom(store_url, "trace", "replay", "--out-dir", str(out), "--warmup-days", "0.1",
                     "--policy", "predictive", "--policy", "reactive", "--json")
    assert done.returncode == 0, done.stderr
    assert "ignores the settings" not in done.stderr  # settings.yaml holds what it honours
    doc = json.loads(done.stdout)
    assert doc["window"] == {"since": "2026-12-03T08:00:00+00:00",
                             "until": "2026-12-03T08:20:00+00:00"}
    scores = doc["scores"]
    assert list(scores) == ["recorded", "predictive", "reactive"]
    assert {s["model_minutes"] for s in scores.values()} == {6 * 20}  # the same model-minutes
    assert scores["recorded"]["gpu_hours"] == pytest.approx(demo["gpu_hours"], abs=1e-3)
    assert scores["recorded"]["cost_usd"] == pytest.approx(demo["cost_usd"], abs=0.01)
    trace = (out / "trace.csv").read_text().splitlines()
    assert trace[1].startswith("2026-12-03T05:36:00Z,")  # 0.1 day of warm-up before 08:00
    # mistral-7b-support's replicas serve 0.6 x its profile's 18 rps in the demo's fleet
    written = yaml.safe_load((out / "models.yaml").read_text())
    credited = {m["name"]: m.get("true_per_replica_rps") for m in written["models"]}
    assert credited["mistral-7b-support"] == pytest.approx(10.8)
    assert len(credited) == 6
    # the demo fleet's nodes: provisioned in 60-180 s (sim.node_provision_s), not 120 / 240 s
    assert written["fleet"] == {"node_provision_s": {"p50": 120.0, "p90": 168.0}}
    # its replicas start in an image pull (30-120 s), a weight load (5-60 s) and a warm-up
    # (10-30 s), where the policies plan with each model's own cold start, as the loop did
    assert {m["name"]: m["true_cold_start"] for m in written["models"]} == {
        name: {"p50_s": 127.5, "p90_s": 169.08} for name in credited}
    assert {m["name"]: m["cold_start"]["p50_s"] for m in written["models"]}["bert-embed"] == 5.0
    settings = load_settings(out / "settings.yaml")
    assert settings.pools == default_pools()  # the demo's own pools, prices and limits
    assert settings.reconcile.target_utilization == 0.8  # serve's, not simulate's 1
    assert {p["from"] for p in doc["simulate"]["pools"]} == {"config"}
    # a model added inside the window had no demand before its first observation
    assert doc["simulate"]["fill_gaps"] == "hold-after-first"
    replayed = {p: (out / f"simulated.{p}.csv").read_text() for p in ("predictive", "reactive")}
    command = shlex.split(doc["rerun"]["serve"])  # the command it prints for an operator
    assert command[:2] == ["headroom", "simulate"]
    rerun = _headroom(store_url, *command[1:])
    assert rerun.returncode == 0, rerun.stderr
    assert {p: (out / f"simulated.{p}.csv").read_text() for p in replayed} == replayed


def _demo_store(tmp_path: Path) -> str:
    """The URL of a 20-minute demo's SQLite store."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    demo_on_store(url, tmp_path)
    return url


def _replay_demo(url: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``trace replay`` of a demo's store into ``out``, after a tenth of a day's warm-up."""
    return _headroom(url, "trace", "replay", "--out-dir", str(out), "--warmup-days", "0.1",
                     *args)


def test_a_set_change_replays_again_on_the_same_draws_scored_beside_serves_settings(
        tmp_path: Path) -> None:
    url = _demo_store(tmp_path)
    out = tmp_path / "replay"
    done = _replay_demo(url, out, "--set", "reconcile.target_utilization=0.95", "--set",
                        "autoscaling.keep_s=0", "--set", "pools.l4.price_per_gpu_hour=0",
                        "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (changed_run,) = doc["variants"]
    assert changed_run["label"] == "--set"
    assert changed_run["changes"] == [
        {"key": "reconcile.target_utilization", "serve": 0.8, "replay": 0.95},
        {"key": "autoscaling.keep_s", "serve": 240.0, "replay": 0},
        {"key": "pools.l4.price_per_gpu_hour", "serve": 0.8, "replay": 0}]
    scores = doc["scores"]
    assert list(scores) == ["recorded", "predictive", "predictive (--set)"]
    assert {s["model_minutes"] for s in scores.values()} == {6 * 20}
    # replicas filled to 95 % and dropped at once take fewer GPUs than serve's 80 % and 240 s
    assert scores["predictive (--set)"]["gpu_hours"] < scores["predictive"]["gpu_hours"]
    serve, changed = (load_settings(out / name) for name in ("settings.yaml",
                                                             "settings.changed.yaml"))
    assert (serve.reconcile.target_utilization, changed.reconcile.target_utilization) == (0.8,
                                                                                          0.95)
    assert changed.autoscaling.keep_s == 0
    assert changed.model_copy(update={"reconcile": serve.reconcile,
                                      "autoscaling": serve.autoscaling,
                                      "pools": serve.pools}) == serve  # nothing else
    # free L4s: the change's cost is its A100 and H100 GPUs' alone, at serve's prices
    recorded = {r.minute_at for r in read_timeline(out / "recorded.csv")}
    scored = [r for r in read_timeline(out / "changed.csv") if r.minute_at in recorded]
    assert scores["predictive (--set)"]["cost_usd"] == pytest.approx(sum(
        r.product_gpus_billed * {"A100-80GB": 5.12, "H100-80GB": 6.88}.get(r.gpu_product, 0.0)
        for r in {(r.minute_at, r.gpu_product): r for r in scored}.values()) / 60, abs=0.01)
    assert changed_run["simulate"]["timelines"] == {"predictive": str(out / "changed.csv")}
    assert changed_run["simulate"]["seed"] == doc["simulate"]["seed"] == 1
    text = _replay_demo(url, out, "--set", "autoscaling.keep_s=0")
    assert text.returncode == 0, text.stderr
    assert "predictive (--set)" in text.stdout
    assert "(--set) autoscaling.keep_s: 0 (serve: 240.0)" in text.stdout
    assert f"--config {out / 'settings.changed.yaml'}" in text.stdout  # how to re-run it
    # a value only simulate checks fails in the changed replay, which runs first
    bad = tmp_path / "bad"
    refused = _replay_demo(url, bad, "--set", "forecast.method=bogus")
    assert refused.returncode == 2
    assert (f"{bad / 'settings.changed.yaml'}: forecast.method: unknown forecast method "
            "'bogus'") in " ".join(refused.stderr.split())
    assert not (bad / "simulated.csv").exists()


def test_a_sweep_replays_once_a_value_each_scored_beside_serves_settings(
        tmp_path: Path) -> None:
    url = _demo_store(tmp_path)
    out = tmp_path / "replay"
    done = _replay_demo(url, out, "--sweep", "reconcile.target_utilization=0.6,0.95", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    low, high = (f"predictive (reconcile.target_utilization={v})" for v in ("0.6", "0.95"))
    assert list(doc["scores"]) == ["recorded", "predictive", low, high]
    # replicas filled to 60 % take more GPUs than filled to 95 %
    assert doc["scores"][low]["gpu_hours"] > doc["scores"][high]["gpu_hours"]
    assert [(v["label"], v["changes"]) for v in doc["variants"]] == [
        (f"reconcile.target_utilization={v}",
         [{"key": "reconcile.target_utilization", "serve": 0.8, "replay": float(v)}])
        for v in ("0.6", "0.95")]
    assert [load_settings(out / f"settings.sweep-{i}.yaml").reconcile.target_utilization
            for i in (1, 2)] == [0.6, 0.95]
    assert list(doc["rerun"]) == ["serve", "reconcile.target_utilization=0.6",
                                  "reconcile.target_utilization=0.95"]
    assert f"--timeline-out {out / 'sweep-2.csv'}" in doc["rerun"][
        "reconcile.target_utilization=0.95"]
    text = _replay_demo(url, out, "--sweep", "reconcile.target_utilization=0.6,0.95")
    assert text.returncode == 0, text.stderr
    assert f"│ {high} │" in text.stdout  # the label whole, in a narrow terminal too


def test_a_store_without_ticks_has_nothing_to_replay_and_writes_nothing(tmp_path: Path
                                                                       ) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store.open(url, migrate=True)
    store.upsert_models(load_model_specs(EXAMPLE))
    at = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
    store.save_observations([("resnet50", at + timedelta(seconds=30 * i), 100.0)
                             for i in range(4)])
    store.engine.dispose()
    out = tmp_path / "replay"
    done = _headroom(url, "trace", "replay", "--out-dir", str(out))
    assert done.returncode == 1
    assert ("has no models or no reconcile ticks or observed load yet; nothing to replay"
            in " ".join(done.stderr.split()))
    assert not out.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--until", "yesterday"], "--until"),
    (["--warmup-days", "-1"], "--warmup-days"),
    (["--days", "0"], "--days"),
    (["--set", "autoscaling.kep_s=0"], "--set autoscaling.kep_s: not a setting headroom "
                                       "simulate honours; did you mean autoscaling.keep_s?"),
    (["--set", "autoscaling.keep_s"], "expected KEY=VALUE"),
    (["--set", "pools.l5.max_nodes=1"], "--set pools.l5: no pool named 'l5'; the pools: "
                                        "a100-80gb, h100-80gb, l4"),
    (["--set", "safety.max_node_step=2", "--set", "safety.max_node_step=3"],
     "--set safety.max_node_step: given twice"),
    (["--set", "reconcile.target_utilization=1.5"],
     "--set: reconcile.target_utilization: Input should be less than or equal to 1"),
    (["--sweep", "reconcile.target_utilization=0.7,1.5"],
     "--sweep: reconcile.target_utilization: Input should be less than or equal to 1"),
    (["--set", "autoscaling.keep_s=0", "--sweep", "autoscaling.keep_s=60,120"],
     "--sweep autoscaling.keep_s: --set gives it too"),
])
def test_bad_options_are_refused_naming_the_option_before_the_store_is_read(
        tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "replay"
    done = _headroom(f"sqlite:///{tmp_path / 'missing.db'}", "trace", "replay", "--out-dir",
                     str(out), *args)
    assert done.returncode == 2
    assert message in done.stderr
    assert not out.exists() and not (tmp_path / "missing.db").exists()
