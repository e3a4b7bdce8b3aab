"""Placement benchmarks through the independent judges in ../shared/bench.

For every dev openb trace, a fresh ``headroom placement serve`` is started and
``openb_replay.py`` replays the trace against it (GPU allocation at 100% / 130% arrived demand,
Place calls/s and latency; the default trace also gets the ``--concurrency`` load phase). Then
a fresh server answers ``parvagpu_check.py --scenario all`` (MIG x MPS plans, GPUs used). The
table compares Headroom with the FGD authors' anchors (FGD, BestFit) and ParvaGPU's GPU counts.

    python benchmarks/placement/run.py [--traces default,cpu250] [--skip-parvagpu]
                                        [--concurrency 8] [--load-seconds 10]
                                        [--server-cpus auto|none|LIST]
                                        [--store none|sqlite|postgres]

The server is started with ``--cpus`` (``auto``: the last CPU this process may use; ``none``:
not pinned), as an operator would pin a latency-sensitive server; the results record it.
``--store`` starts every server with its placement state kept in a fresh store (``--db`` on a
new SQLite file, or ``--config`` naming a new database on the PostgreSQL server at
127.0.0.1:5432, dropped afterwards): what a durable placement server costs per call.

Writes benchmarks/results/placement.json (``--store``: placement_store_<kind>.json): per trace
the headline figures, the judge's ``errors`` and ``rejected_but_feasible`` and its whole
document under ``judge``; the table's ``valid`` is "NO" when the judge found the run invalid or
any Place call failed (errors > 0). Skips with a message when ../shared is absent.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # for benchmarks.provenance

from benchmarks.provenance import provenance, start  # noqa: E402

SHARED = REPO.parent / "shared"
BENCH = SHARED / "bench"
OPENB = SHARED / "data" / "packing" / "openb"
PARVA = SHARED / "data" / "packing" / "parvagpu"
ANCHORS = SHARED / "data" / "packing" / "fgd_anchor_summary.csv"
RESULTS = REPO / "benchmarks" / "results" / "placement.json"
PARVAGPU_GPUS = {"SLO1": 2, "SLO2": 3, "SLO3": 5, "SLO4": 7}
#: issue targets
TARGET_DEFAULT_AT_130 = 96.5
TARGET_CALLS_PER_S = 1200.0
TARGET_PAIRS_PER_S = 2000.0
TARGET_P99_MS = 5.0
SERVER_START_TIMEOUT_S = 60.0


#: ``--cpus`` of every server started (None: not pinned); set by ``main``
SERVER_CPUS: str | None = None
#: ``--store`` of every server started: none | sqlite | postgres; set by ``main``
SERVER_STORE = "none"
PG_ADMIN_URL = os.environ.get("HEADROOM_TEST_PG_ADMIN_URL",
                              "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def server_cpus(choice: str) -> str | None:
    """``--server-cpus``: ``auto`` = the last CPU this process may use, ``none`` = no pinning,
    else a CPU list passed through."""
    if choice == "none":
        return None
    if choice == "auto":
        return str(max(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else None
    return choice


class Server:
    """``headroom placement serve --listen 127.0.0.1:0 [--cpus ...]`` in a subprocess."""

    def __init__(self) -> None:
        cmd = [sys.executable, "-c", "from controlplane.cli import main; main()",
               "placement", "serve", "--listen", "127.0.0.1:0"]
        if SERVER_CPUS is not None:
            cmd += ["--cpus", SERVER_CPUS]
        self.tmp = tempfile.TemporaryDirectory(prefix="placement-bench-")
        self.database = ""
        cmd += self._store_flags(Path(self.tmp.name))
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        self.addr = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if "listening on" in line:
                self.addr = line.strip().rsplit(" ", 1)[-1]
                break
        if not self.addr:
            self.stop()
            raise RuntimeError("the placement server did not report its address")

    def _store_flags(self, tmp: Path) -> list[str]:
        """The server's store flags for ``SERVER_STORE``: a new SQLite file, or a new
        PostgreSQL database named in a config file."""
        if SERVER_STORE == "sqlite":
            return ["--db", str(tmp / "placement.db")]
        if SERVER_STORE != "postgres":
            return []
        self.database = f"placement_bench_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{self.database}"')
        config = tmp / "config.yaml"
        config.write_text(f"db:\n  url: postgresql+psycopg://postgres@127.0.0.1:5432/"
                          f"{self.database}\n")
        return ["--config", str(config)]

    @staticmethod
    def _admin(statement: str) -> None:
        from sqlalchemy import create_engine, text

        admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as connection:
                connection.execute(text(statement))
        finally:
            admin.dispose()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.database:
            self._admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
            self.database = ""
        self.tmp.cleanup()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_judge(args: list[str]) -> tuple[dict[str, Any], str]:
    """Run a judge script; returns (its JSON document, its stderr table)."""
    proc = subprocess.run([sys.executable, *args], cwd=BENCH, capture_output=True, text=True,
                          check=False)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = {"ok": False, "error": f"judge printed no JSON (exit {proc.returncode})",
               "stderr_tail": proc.stderr[-2000:]}
    doc["exit_code"] = proc.returncode
    return doc, proc.stderr


def load_anchors() -> dict[str, dict[str, tuple[float, float]]]:
    out: dict[str, dict[str, tuple[float, float]]] = {}
    with ANCHORS.open() as fh:
        for row in csv.DictReader(fh):
            trace = row["workload"].removeprefix("openb_pod_list_")
            policy = row["policy"].split("-", 1)[-1]
            out.setdefault(trace, {})[policy] = (float(row["alloc_at_100"]),
                                                 float(row["alloc_at_130"]))
    return out


def dev_traces() -> list[str]:
    return sorted(p.stem.removeprefix("openb_pod_list_")
                  for p in OPENB.glob("openb_pod_list_*.csv"))


def replay(trace: str, concurrency: int, load_seconds: float) -> dict[str, Any]:
    pods = OPENB / f"openb_pod_list_{trace}.csv"
    with Server() as server:
        args = [str(BENCH / "openb_replay.py"), "--addr", server.addr,
                "--proto-root", str(REPO / "protos"), "--pods", str(pods),
                "--nodes", str(OPENB / "openb_node_list_gpu_node.csv")]
        if concurrency > 1:
            args += ["--concurrency", str(concurrency), "--load-seconds", str(load_seconds)]
        doc, table = run_judge(args)
    sys.stderr.write(table)
    return doc


def parvagpu() -> dict[str, Any]:
    with Server() as server:
        doc, table = run_judge([str(BENCH / "parvagpu_check.py"), "--addr", server.addr,
                                "--proto-root", str(REPO / "protos"), "--data", str(PARVA),
                                "--scenario", "all"])
    sys.stderr.write(table)
    return doc


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[[fmt(c) for c in r] for r in rows]]
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for k, r in enumerate(cells):
        print("  " + "  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)))
        if k == 0:
            print("  " + "  ".join("-" * w for w in widths))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", help="comma-separated trace names (default: every dev "
                                         "trace in ../shared/data/packing/openb)")
    parser.add_argument("--skip-parvagpu", action="store_true")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="load phase on the default trace (1 = none)")
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--server-cpus", default="auto",
                        help="the server's --cpus: auto (the last usable CPU), none, or a list")
    parser.add_argument("--store", choices=("none", "sqlite", "postgres"), default="none",
                        help="keep each server's placement state in a fresh store")
    args = parser.parse_args()
    started = start()
    global SERVER_CPUS, SERVER_STORE, RESULTS
    SERVER_CPUS = server_cpus(args.server_cpus)
    SERVER_STORE = args.store
    if SERVER_STORE != "none":
        RESULTS = RESULTS.with_name(f"placement_store_{SERVER_STORE}.json")
    if not (BENCH.is_dir() and OPENB.is_dir()):
        print(f"skipped: {SHARED} (judges and data) is absent")
        return 0
    anchors = load_anchors()
    traces = args.traces.split(",") if args.traces else dev_traces()
    results: dict[str, Any] = {"benchmark": "placement", "server_cpus": SERVER_CPUS,
                               "server_store": SERVER_STORE,
                               "traces": {}, "parvagpu": None,
                               "targets": {"default_alloc_at_130_pct": TARGET_DEFAULT_AT_130,
                                           "place_calls_per_s": TARGET_CALLS_PER_S,
                                           "place_p99_ms": TARGET_P99_MS,
                                           "load_pairs_per_s": TARGET_PAIRS_PER_S,
                                           "parvagpu_gpus": PARVAGPU_GPUS}}
    rows: list[list[Any]] = []
    for trace in traces:
        conc = args.concurrency if trace == "default" else 1
        doc = replay(trace, conc, args.load_seconds)
        product = doc.get("product") or {}
        bestfit = doc.get("bestfit_reference") or {}
        fgd = anchors.get(trace, {}).get("FGD")
        paper_bf = anchors.get(trace, {}).get("BestFit")
        api = product.get("api") or {}
        errors = product.get("errors")
        # a row counts only if the judge found it valid and no call failed
        row_valid = bool(doc.get("valid")) and errors == 0
        results["traces"][trace] = {
            "valid": doc.get("valid"), "ok": doc.get("ok"), "exit_code": doc["exit_code"],
            "alloc_pct_at_100": product.get("alloc_pct_at_100"),
            "alloc_pct_at_130": product.get("alloc_pct_at_end"),
            "judge_bestfit_at_100": bestfit.get("alloc_pct_at_100"),
            "judge_bestfit_at_130": bestfit.get("alloc_pct_at_end"),
            "fgd_anchor": fgd, "bestfit_anchor": paper_bf,
            "api": api, "load": doc.get("load"),
            "violations": (product.get("violations") or {}).get("by_rule"),
            "error": doc.get("error"),
            "placed": product.get("placed"), "rejected": product.get("rejected"),
            "errors": errors, "rejected_but_feasible": product.get("rejected_but_feasible"),
            "valid_without_errors": row_valid,
            "judge": doc,  # openb_replay.py's whole document (product, curve, warnings, ...)
        }
        at130 = product.get("alloc_pct_at_end")
        rows.append([trace, product.get("alloc_pct_at_100"), at130,
                     bestfit.get("alloc_pct_at_end"), fgd[1] if fgd else None,
                     (at130 - fgd[1]) if (fgd and at130 is not None) else None,
                     api.get("calls_per_s"), (api.get("latency_ms") or {}).get("p99"),
                     errors, product.get("rejected_but_feasible"),
                     "yes" if row_valid else "NO"])
        results["provenance"] = provenance(started)  # kept current: a partial run says so
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=2))
    if not args.skip_parvagpu:
        results["parvagpu"] = parvagpu()
    results["provenance"] = provenance(started)
    RESULTS.write_text(json.dumps(results, indent=2))

    print_table("openb replay: GPU allocation (%) vs the FGD authors' anchors (@130% arrived)",
                ["trace", "@100%", "@130%", "BestFit(judge)", "FGD(paper)", "vs FGD",
                 "Place/s", "p99 ms", "errors", "rejected, fitted", "valid"], rows)
    load = (results["traces"].get("default") or {}).get("load")
    if load and "skipped" not in load:
        place = (load.get("latency_ms") or {}).get("place") or {}
        print_table("load phase on the default trace",
                    ["threads", "pairs/s", "calls/s", "Place p50 ms", "Place p99 ms",
                     "rejected", "errors"],
                    [[load.get("concurrency"), load.get("pairs_per_s"), load.get("calls_per_s"),
                      place.get("p50"), place.get("p99"), load.get("rejected"),
                      load.get("errors")]])
    pv = results["parvagpu"]
    if pv:
        prow = [[s.get("scenario"), s.get("parvagpu_gpus"), s.get("gpus_used"),
                 "yes" if s.get("valid") else "NO", s.get("plan_wall_s")]
                for s in pv.get("scenarios", [])]
        prow.append(["total", pv.get("parvagpu_total_gpus"), pv.get("total_gpus_used"),
                     "yes" if pv.get("valid") else "NO", None])
        print_table("PlanFleet on the ParvaGPU scenarios (GPUs used)",
                    ["scenario", "ParvaGPU", "Headroom", "valid", "plan s"], prow)
    print(f"\nserver pinned to CPU(s): {SERVER_CPUS or 'not pinned'}; placement state: "
          f"{'in memory' if SERVER_STORE == 'none' else 'kept in ' + SERVER_STORE}")
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
