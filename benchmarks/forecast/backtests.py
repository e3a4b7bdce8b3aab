"""Backtest every series in ../shared/data/forecast with ``headroom forecast backtest`` and score
it with the independent judge ``../shared/bench/forecast_score.py`` (``--run --leak-check``):
a table per series, Headroom vs the best naive baseline at the headline 20-minute lead.

    python benchmarks/forecast/backtests.py [--only servegen,nab] [--no-leak-check]

Writes benchmarks/results/forecast.json. Skips with a message when ../shared is absent.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for benchmarks.provenance

from benchmarks.provenance import provenance, start  # noqa: E402

SHARED = REPO.parent / "shared"
DATA = SHARED / "data" / "forecast"
JUDGE = SHARED / "bench" / "forecast_score.py"
OUT = REPO / "benchmarks" / "forecast" / "out"
RESULTS = REPO / "benchmarks" / "results" / "forecast.json"
#: issue targets: ratio <= 0.90 on these; never above 1.00 on any dev series
TARGET_SERIES = {"servegen_llm_10min/language/m-large", "servegen_llm_10min/language/m-small",
                 "lora_sd_10min/ALL", "nab/nyc_taxi/value"}


@dataclass(frozen=True)
class Dataset:
    file: str
    time_col: str
    value_col: str
    series_col: str | None = None
    extra: tuple[str, ...] = ()  # judge-only options (the product infers a numeric unit)
    scoring_variants: tuple[tuple[str, ...], ...] = ((),)
    label: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.label or self.file.removesuffix(".csv")


def datasets() -> list[Dataset]:
    out = [
        Dataset("servegen_llm_10min.csv", "ts", "rate_rps", "model"),
        Dataset("lora_sd_10min.csv", "ts", "requests_per_10min", "model"),
        Dataset("lora_sd_total_1min.csv", "ts", "rpm"),
        Dataset("genTD26_qps_1min.csv", "ts_utc_anon", "total_qps"),
        Dataset("azure_llm2023_rpm.csv", "ts", "rpm", "trace"),
        Dataset("mooncake_conversation_rpm.csv", "minute", "rpm", "trace",
                extra=("--time-unit", "min")),
    ]
    for path in sorted((DATA / "nab").glob("*.csv")):
        out.append(Dataset(f"nab/{path.name}", "ts", "value", label=f"nab/{path.stem}"))
    return out


def headroom_command() -> str:
    probe = subprocess.run(["headroom", "forecast", "backtest", "--help"], capture_output=True,
                           check=False)
    if probe.returncode == 0:
        return "headroom"
    entry = Path(__file__).with_name("cli_entry.py")
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(entry))}"


def judge(ds: Dataset, cmd: str, variant: tuple[str, ...], run: bool,
          leak: bool) -> dict[str, Any]:
    pred = OUT / f"{ds.name.replace('/', '_')}.csv"
    args = [sys.executable, str(JUDGE), "--csv", str(DATA / ds.file), "--time-col", ds.time_col,
            "--value-col", ds.value_col, "--horizon", "20m", *variant]
    if ds.series_col:
        args += ["--series-col", ds.series_col]
    if "--time-unit" in ds.extra:
        args += ["--time-unit", ds.extra[ds.extra.index("--time-unit") + 1]]
    if run:
        args += ["--run", "--headroom", cmd, "--test-fraction", "0.3",
                 "--predictions-out", str(pred)]
        if leak:
            args += ["--leak-check"]
    else:
        args += ["--predictions", str(pred)]
    started = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    try:
        doc: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = {"ok": False, "error": (proc.stderr or proc.stdout)[-800:]}
    doc["judge_wall_s"] = round(time.perf_counter() - started, 1)
    doc["judge_exit"] = proc.returncode
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated substrings of dataset names")
    ap.add_argument("--no-leak-check", action="store_true")
    args = ap.parse_args()
    started = start()
    if not JUDGE.is_file() or not DATA.is_dir():
        print(f"skipped: {SHARED} (data and judge) not found", file=sys.stderr)
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = headroom_command()
    docs: dict[str, Any] = {}
    if args.only and RESULTS.is_file():  # re-run some datasets, keep the others' results
        docs = json.loads(RESULTS.read_text()).get("judge", {})
    for ds in datasets():
        if args.only and not any(s in ds.name for s in args.only.split(",")):
            continue
        for i, variant in enumerate(ds.scoring_variants):
            key = ds.name + ("" if not variant else " " + " ".join(variant))
            print(f"== {key}", file=sys.stderr, flush=True)
            docs[key] = judge(ds, cmd, variant, run=i == 0, leak=not args.no_leak_check)
    rows: list[dict[str, Any]] = []
    for ds in datasets():
        for variant in ds.scoring_variants:
            key = ds.name + ("" if not variant else " " + " ".join(variant))
            if key in docs:
                rows += table_rows(key, ds, docs[key])
    print_table(rows)
    summary = summarise(rows)
    print(json.dumps(summary, indent=2), file=sys.stderr)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "forecast backtests", "command": cmd,
                                   "rows": rows, "summary": summary,
                                   "judge": {k: compact(v) for k, v in docs.items()},
                                   "provenance": provenance(started)}, indent=1))
    print(f"wrote {RESULTS}", file=sys.stderr)
    return 0


SERIES_KEYS = ("pairs_scored", "product", "baselines", "best_baseline",
               "wape_ratio_vs_best_baseline", "persistence_p90")


def compact(doc: dict[str, Any]) -> dict[str, Any]:
    """The judge's document without its per-series diagnostics (kept small in the repo)."""
    kept = ("ok", "error", "judge_exit", "judge_wall_s", "summary", "pooled", "leak_check",
            "determinism_check", "series_not_scored")
    out: dict[str, Any] = {k: doc[k] for k in kept if k in doc}
    if "run" in doc:
        out["run"] = {k: doc["run"].get(k) for k in ("command", "wall_s", "json_output_ok")}
    if "series" in doc:
        out["series"] = {name: {**{k: s.get(k) for k in SERIES_KEYS},
                                "all_pairs": {"wape_ratio_vs_best_baseline": s.get(
                                    "all_pairs", {}).get("wape_ratio_vs_best_baseline")},
                                "headline": s.get("checks", s).get("headline")}
                         for name, s in doc["series"].items()}
    return out


def table_rows(key: str, ds: Dataset, doc: dict[str, Any]) -> list[dict[str, Any]]:
    if not doc.get("series"):
        return [{"dataset": key, "series": "-", "scored": False,
                 "note": str(doc.get("error", "nothing scored"))[:160].replace("\n", " ")}]
    leak = doc.get("leak_check", {})
    verdict = ",".join(v["verdict"] for v in leak.values() if isinstance(v, dict)
                       and "verdict" in v) or "-"
    out = []
    for name, s in doc["series"].items():
        best = s["best_baseline"]
        pp = s.get("persistence_p90") or {}
        out.append({
            "dataset": key, "series": name, "scored": True, "pairs": s["pairs_scored"],
            "headroom_wape": s["product"]["wape"], "best_baseline": best,
            "best_baseline_wape": s["baselines"][best]["wape"] if best else None,
            "ratio": s["wape_ratio_vs_best_baseline"], "p90_coverage": s["product"]["coverage"],
            "pinball_scaled": s["product"]["pinball_scaled"],
            "persistence_p90_pinball_scaled": pp.get("pinball_scaled"),
            "all_pairs_ratio": s["all_pairs"]["wape_ratio_vs_best_baseline"],
            "leak_check": verdict if name == leak.get("series") else "",
            "target": f"{ds.name}/{name}" in TARGET_SERIES and not key.endswith("missing"),
        })
    return out


def print_table(rows: list[dict[str, Any]]) -> None:
    cols = ["dataset", "series", "pairs", "headroom_wape", "best_baseline", "best_baseline_wape",
            "ratio", "p90_coverage", "pinball_scaled", "persistence_p90_pinball_scaled",
            "leak_check"]
    text = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in text)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for t in text:
        print("  ".join(v.ljust(w) for v, w in zip(t, widths, strict=True)))


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r.get("scored") and r.get("ratio") is not None]
    main_rows = [r for r in scored if "missing" not in r["dataset"]]
    targets = {f"{r['dataset']}/{r['series']}": r["ratio"] for r in scored if r.get("target")}
    covs = [r["p90_coverage"] for r in main_rows if r["p90_coverage"] is not None]
    return {
        "series_scored": len(main_rows),
        "target_series_ratio": targets,
        "target_series_at_or_below_0_90": sum(v <= 0.90 for v in targets.values()),
        "series_ratio_above_1_00": [f"{r['dataset']}/{r['series']}" for r in main_rows
                                    if r["ratio"] > 1.0],
        "max_ratio": max((r["ratio"] for r in main_rows), default=None),
        "mean_ratio": round(sum(r["ratio"] for r in main_rows) / len(main_rows), 4)
        if main_rows else None,
        "p90_coverage_mean": round(sum(covs) / len(covs), 4) if covs else None,
        "p90_coverage_within_0_88_0_92": sum(0.88 <= c <= 0.92 for c in covs),
        "leak_checks": sorted({r["leak_check"] for r in rows if r.get("leak_check")}),
    }


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


if __name__ == "__main__":
    sys.exit(main())
