"""Drive Debian's headless Chromium over the DevTools protocol (CDP, websockets on 127.0.0.1).

Small on purpose: start Chromium with a private profile, open a URL, evaluate JavaScript, wait
for a condition, take a full-page screenshot. No downloads, no network beyond 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")


# JavaScript probes of a Streamlit page: rendered (the title shown, the page's closing
# "Rendered in" caption present, the script idle), every Vega-Lite chart drawn, and anything
# that went wrong (a developer's Deploy button in an operator's toolbar too).
RENDERED = """(() => {
  const h1 = document.querySelector('h1');
  const done = Array.from(document.querySelectorAll('[data-testid="stCaptionContainer"]'))
                    .some(c => c.innerText.startsWith('Rendered in'));
  const running = document.querySelector('[data-testid="stStatusWidget"]');
  return !!h1 && h1.innerText.trim() === %r && done && !running;
})()"""
CHARTS_DRAWN = """(() => {
  const charts = document.querySelectorAll('[data-testid="stVegaLiteChart"]');
  return Array.from(charts).every(c => c.querySelector('canvas, svg'));
})()"""
PROBLEMS = """(() => {
  const text = document.body.innerText;
  return {exceptions: document.querySelectorAll('[data-testid="stException"]').length,
          deployButton: !!document.querySelector('[data-testid="stAppDeployButton"]'),
          traceback: text.includes('Traceback'), notFound: text.includes('Page not found'),
          errors: Array.from(document.querySelectorAll('[data-testid="stAlertContentError"]'))
                       .map(e => e.innerText)};
})()"""
#: the tables that scroll sideways: [scrolled width, shown width] of each grid wider than its box
SIDEWAYS = """(() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
  .map(e => e.querySelector('.dvn-scroller')).filter(s => !!s)
  .map(s => [s.scrollWidth, s.clientWidth]))()"""
#: the Overview of a running loop: the last tick's time and the fleet's cost per hour are shown
LIVE_OVERVIEW = """(() => {
  const metrics = Array.from(document.querySelectorAll('[data-testid="stMetric"]'))
                       .map(m => m.innerText);
  const tick = metrics.find(t => t.startsWith('Last tick'));
  const cost = metrics.find(t => t.startsWith('$ / h now'));
  return !!tick && /\\d\\d:\\d\\d:\\d\\d/.test(tick) && !!cost && /\\$\\d/.test(cost);
})()"""


class Browser:
    def __init__(self, profile_dir: Path, width: int = 1440, height: int = 1000) -> None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        (profile_dir / "DevToolsActivePort").unlink(missing_ok=True)  # left by an earlier run
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile_dir}", "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = self._devtools_port(profile_dir / "DevToolsActivePort")
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list",
                                                        timeout=10).read())
            page = next(t for t in targets if t.get("type") == "page")
            self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                                  suppress_origin=True)
        except BaseException:
            self._stop_process()
            raise
        self._id = 0
        self.width, self.height = width, height
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.reset_viewport()

    def reset_viewport(self) -> None:
        """Back to the window size the browser was started with (a screenshot stretches it)."""
        self._set_viewport(self.width, self.height)

    def _set_viewport(self, width: int, height: int) -> None:
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _devtools_port(self, marker: Path, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if marker.is_file() and marker.read_text().strip():
                return int(marker.read_text().splitlines()[0])
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with code {self.process.returncode}")
            time.sleep(0.1)
        raise TimeoutError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def open(self, url: str) -> None:
        """Navigate to ``url`` from a blank page, so nothing of the previous page lingers."""
        self.call("Page.navigate", url="about:blank")
        self.wait_for("location.href === 'about:blank' && document.readyState === 'complete'",
                      timeout_s=10, poll_s=0.02)
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout_s: float, poll_s: float = 0.1) -> bool:
        """Poll a JavaScript expression until it is truthy; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return True
            time.sleep(poll_s)
        return False

    def screenshot(self, path: Path) -> Path:
        height = int(self.evaluate("document.documentElement.scrollHeight") or 1000)
        main = self.evaluate("(() => { const m = document.querySelector("
                             "'[data-testid=\"stMain\"]'); return m ? m.scrollHeight : 0; })()")
        height = max(height, int(main or 0), 800)
        self._set_viewport(1440, min(height, 6000))
        time.sleep(0.5)
        shot = self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self._stop_process()

    def _stop_process(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the process we started and its children (its own session), by its id."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
