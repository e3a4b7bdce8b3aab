"""Seconds from starting `headroom demo` to live data on its dashboard (target: <= 30 s).

Each run starts `headroom demo --speed 30` on a fresh SQLite file (nothing imported or cached by
an earlier run of the demo itself), waits for its dashboard's health endpoint, opens the Overview
in a fresh headless Chromium profile and polls until the page shows the last tick's time and the
fleet's cost per hour (the same check as `tests/dashboard/test_browser_pages.py`). The clock runs
from the demo's `Popen` to the first poll that sees both. The demo is stopped after each run.
Prints a table; writes `benchmarks/results/dashboard_demo_live.json`.

    python benchmarks/dashboard/demo_live.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "dashboard"))  # the CDP client shared with the tests
sys.path.insert(0, str(REPO))  # for benchmarks.provenance

from dashboard_browser import LIVE_OVERVIEW, PROBLEMS, Browser, stop_group  # noqa: E402
from first_render import free_port  # noqa: E402  (this folder: the script's own)

from benchmarks.provenance import provenance, start  # noqa: E402

TARGET_S = 30.0
GIVE_UP_S = 180.0
HEADROOM = [sys.executable, "-c", "from controlplane.cli import main; main()"]


def healthy(url: str, process: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


def one_run(work: Path) -> dict[str, object]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    env.update(HEADROOM_DASHBOARD__PORT=str(port), HEADROOM_PLACEMENT__LISTEN="127.0.0.1:0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    started = time.monotonic()
    process = subprocess.Popen([*HEADROOM, "demo", "--db", str(work / "demo.db"), "--speed", "30"],
                               env=env, cwd=work, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    browser: Browser | None = None
    try:
        deadline = started + GIVE_UP_S
        if not healthy(url, process, deadline):
            return {"live_s": None, "healthy_s": None, "error": "dashboard never healthy"}
        healthy_s = time.monotonic() - started
        browser = Browser(work / "chromium-profile")
        browser.open(url)
        shown = browser.wait_for(LIVE_OVERVIEW, timeout_s=max(0.0, deadline - time.monotonic()),
                                 poll_s=0.25)
        live_s = time.monotonic() - started
        problems = browser.evaluate(PROBLEMS)
        return {"live_s": round(live_s, 2) if shown else None, "healthy_s": round(healthy_s, 2),
                "problems": problems}
    finally:
        if browser is not None:
            browser.close()
        stop_group(process)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results"
                    / "dashboard_demo_live.json")
    args = ap.parse_args()
    begun = start()
    runs = []
    for k in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="headroom-demo-live-") as tmp:
            run = one_run(Path(tmp))
        runs.append(run)
        print(f"  run {k + 1}: dashboard healthy {run['healthy_s']} s, live data {run['live_s']} s",
              file=sys.stderr)
    times = [r["live_s"] for r in runs if isinstance(r["live_s"], float)]
    worst = max(times) if len(times) == len(runs) else None
    doc = {"benchmark": "headroom demo: seconds to live data on the dashboard",
           "target_s": TARGET_S, "runs": runs, "worst_s": worst,
           "meets_target": worst is not None and worst <= TARGET_S,
           "load_1min_after": os.getloadavg()[0], "python": platform.python_version(),
           "cpus": os.cpu_count(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime()),
           "provenance": provenance(begun)}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'run':>4}  {'healthy s':>9}  {'live data s':>11}  target {TARGET_S:g} s")
    for k, run in enumerate(runs, 1):
        print(f"{k:>4}  {run['healthy_s']!s:>9}  {run['live_s']!s:>11}")
    print(f"worst {worst} s: {'meets' if doc['meets_target'] else 'misses'} the target; "
          f"wrote {args.out}")


if __name__ == "__main__":
    main()
