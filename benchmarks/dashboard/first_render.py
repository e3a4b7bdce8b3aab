"""First render of each dashboard page over a large store (target: <= 3 s per page).

Store: 200 models on pools of 1,000 GPUs (340-812 GPUs in each tick's snapshot, 327-782 of
them placed on; 388 in the last inventory), 7 days of minute data (``seed_store.py``; seeded on
first use with ``--seed``); the results record the pools' capacity, the last inventory and the
per-tick range under ``store``. For each page, two cold measurements:

* ``browser_first_s`` (the number the target applies to): a fresh ``streamlit run
  dashboard/app.py`` process and a fresh headless Chromium profile; the server first serves one
  other page (What-if, which reads nothing from the store; Fleet before What-if itself), so
  Python imports are done and this page's query caches are empty. The clock runs from
  ``Page.navigate`` (from a blank page) until the page's title and its closing "Rendered in"
  caption are shown, the script is idle and every chart is drawn. ``browser_reload_s`` loads
  the same page again (caches filled).
* ``browser_cold_process_s``: the same page as the very first request of a fresh server
  (includes importing pandas, altair, SQLAlchemy and the app, once per process).
* ``script_cold_s``: Streamlit's AppTest runs the page script alone with cleared caches, after
  the shared modules are imported (query and chart-building time without the browser).

The OS page cache is warm (the store was just seeded or read). Prints a table; writes
``benchmarks/results/dashboard.json``.

    python benchmarks/dashboard/first_render.py [--db /tmp/headroom-bench/dashboard.db] [--seed]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TypedDict

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "dashboard"))  # the CDP client shared with the tests

from dashboard_browser import CHARTS_DRAWN, PROBLEMS, RENDERED, Browser, stop_group  # noqa: E402
from seed_store import POOLS  # noqa: E402  (this folder: the script's own)

from benchmarks.provenance import provenance, start  # noqa: E402

APP = REPO / "dashboard" / "app.py"
PAGES = [("", "Overview", "overview.py"), ("fleet", "Fleet", "fleet.py"),
         ("models", "Models", "models.py"), ("cost", "Cost", "cost.py"),
         ("decisions", "Decisions", "decisions.py"), ("what-if", "What-if", "whatif.py")]
TARGET_S = 3.0


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def store_stats(db: Path) -> dict[str, object]:
    with sqlite3.connect(db) as connection:
        counts = {t: connection.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("models", "gpus", "observations", "ticks", "plans", "placements",
                            "actions", "forecasts")}
        first, last = connection.execute("SELECT min(started_at), max(started_at) FROM ticks"
                                         ).fetchone()
        ready = connection.execute("SELECT min(gpus_ready), max(gpus_ready) FROM ticks"
                                   ).fetchone()
        placed = connection.execute("SELECT min(gpus_placed), max(gpus_placed) FROM plans"
                                    ).fetchone()
    # "gpus" (kept) counts the gpus table: the last inventory, not the pools' capacity
    return {"size_mb": round(db.stat().st_size / 1e6, 1), "first_tick": first,
            "last_tick": last, **counts,
            "pool_capacity_gpus": sum(gpn * nodes for _, _, gpn, nodes, *_ in POOLS),
            "gpus_in_last_inventory": counts["gpus"],
            "gpus_ready_per_tick": {"min": ready[0], "max": ready[1]},
            "gpus_placed_per_tick": {"min": placed[0], "max": placed[1]}}


def start_server(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    env |= {"HEADROOM_DB__URL": url, "PYTHONPATH": str(REPO)}
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(APP), "--server.address",
             "127.0.0.1", "--server.port", str(port), "--server.headless", "true",
             "--browser.gatherUsageStats", "false", "--global.developmentMode", "false"],
            env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return process
        except OSError:
            time.sleep(0.2)
    stop_group(process)
    raise SystemExit(f"streamlit did not start; see {log}")


def timed_render(browser: Browser, url: str, title: str) -> tuple[float, dict[str, object]]:
    browser.call("Page.navigate", url="about:blank")
    browser.wait_for("location.href === 'about:blank' && document.readyState === 'complete'",
                     timeout_s=10, poll_s=0.02)
    started = time.perf_counter()
    browser.call("Page.navigate", url=url)
    ok = browser.wait_for(RENDERED % title, timeout_s=120, poll_s=0.05)
    ok = ok and browser.wait_for(CHARTS_DRAWN, timeout_s=60, poll_s=0.05)
    elapsed = time.perf_counter() - started
    problems: dict[str, object] = browser.evaluate(PROBLEMS)
    if not ok:
        problems["timeout"] = True
    return elapsed, problems


class PageTimes(TypedDict):
    browser_first_s: float
    browser_reload_s: float
    browser_cold_process_s: float
    problems: dict[str, object]


def browser_times(url: str, work: Path) -> dict[str, PageTimes]:
    out: dict[str, PageTimes] = {}
    for slug, title, _ in PAGES:
        warmup_slug, warmup_title = ("fleet", "Fleet") if slug == "what-if" else ("what-if",
                                                                                 "What-if")
        page_url = "http://127.0.0.1:{port}/" + slug
        # 1. cold process: this page is the server's very first request
        port = free_port()
        server = start_server(url, port, work / "streamlit.log")
        browser = Browser(work / f"profile-cold-{slug or 'overview'}")
        try:
            cold_s, _ = timed_render(browser, page_url.format(port=port), title)
        finally:
            browser.close()
            stop_group(server)
        # 2. page first render: a fresh server has served one other page (imports done, this
        #    page's queries uncached); then a reload with the caches filled
        port = free_port()
        server = start_server(url, port, work / "streamlit.log")
        browser = Browser(work / f"profile-{slug or 'overview'}")
        try:
            timed_render(browser, f"http://127.0.0.1:{port}/{warmup_slug}", warmup_title)
            first_s, problems = timed_render(browser, page_url.format(port=port), title)
            warm_s, _ = timed_render(browser, page_url.format(port=port), title)
            browser.screenshot(work / f"{slug or 'overview'}.png")
        finally:
            browser.close()
            stop_group(server)
        out[title] = {"browser_first_s": round(first_s, 3), "browser_reload_s": round(warm_s, 3),
                      "browser_cold_process_s": round(cold_s, 3), "problems": problems}
        print(f"  {title:10s} first {first_s:6.2f} s  reload {warm_s:6.2f} s  cold process "
              f"{cold_s:6.2f} s", file=sys.stderr)
    return out


def script_times(url: str) -> dict[str, float]:
    os.environ["HEADROOM_DB__URL"] = url
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import dashboard.costing
    import dashboard.history
    import dashboard.queries
    import dashboard.widgets  # noqa: F401  (as app.py does: imports are not page work)

    out = {}
    for _, title, script in PAGES:
        st.cache_data.clear()
        st.cache_resource.clear()
        at = AppTest.from_file(str(APP.parent / "views" / script), default_timeout=300)
        started = time.perf_counter()
        at.run()
        out[title] = round(time.perf_counter() - started, 3)
        if at.exception:
            raise SystemExit(f"{title}: {at.exception[0].value}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("/tmp/headroom-bench/dashboard.db"))
    parser.add_argument("--seed", action="store_true", help="seed the store if it is missing")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/dashboard.json")
    parser.add_argument("--screenshots", type=Path, default=None,
                        help="keep the screenshots in this folder")
    args = parser.parse_args()
    begun = start()
    if not Path("/usr/bin/chromium").exists():
        raise SystemExit("skipped: /usr/bin/chromium (Debian package chromium) is not installed")
    if not args.db.exists():
        if not args.seed:
            raise SystemExit(f"{args.db} does not exist; run with --seed (or seed_store.py)")
        subprocess.run([sys.executable, str(Path(__file__).with_name("seed_store.py")),
                        "--db", str(args.db)], check=True)
    url = f"sqlite:///{args.db.resolve()}"
    stats = store_stats(args.db)
    print(f"store {args.db}: {stats}", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="headroom-dash-bench-"))
    try:
        browser = browser_times(url, work)
        script = script_times(url)
        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
            for png in work.glob("*.png"):
                shutil.copy(png, args.screenshots / png.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [{"page": title, **browser[title], "script_cold_s": script[title],
             "target_s": TARGET_S, "meets_target": browser[title]["browser_first_s"] <= TARGET_S
             and not browser[title]["problems"].get("exceptions")}
            for _, title, _ in PAGES]
    print(f"\n{'page':10s} {'first render':>13s} {'reload':>8s} {'cold process':>13s} "
          f"{'script cold':>12s} {'target':>7s}  ok", file=sys.stderr)
    for r in rows:
        verdict = "yes" if r["meets_target"] else "NO"
        print(f"{r['page']:10s} {r['browser_first_s']:11.2f} s {r['browser_reload_s']:6.2f} s "
              f"{r['browser_cold_process_s']:11.2f} s {r['script_cold_s']:10.2f} s "
              f"{TARGET_S:5.1f} s  {verdict}", file=sys.stderr)
    document = {"benchmark": "dashboard first render", "store": stats, "pages": rows,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform(),
                            "load_average_1m_5m_15m": [round(x, 2) for x in os.getloadavg()]},
                "all_within_target": all(r["meets_target"] for r in rows),
                "provenance": provenance(begun)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps({"all_within_target": document["all_within_target"],
                      "out": str(args.out)}))


if __name__ == "__main__":
    main()
