"""A real Prometheus for tests: backfill OpenMetrics with promtool, start the Debian binary on a
free 127.0.0.1 port with a temporary TSDB, stop it afterwards."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
#: bcrypt (cost 4) of "s3cret", for ``prometheus(basic_auth=("ops", OPS_HASH))``
OPS_HASH = "$2b$04$rI42b01kYoUNKB/O6epOLOInKXImDlerVq8eLEEPg3uEIVFKJzR6u"


@dataclass(frozen=True)
class Family:
    """One metric family: name, labels per series and (unix seconds, value) samples each."""

    name: str
    series: Mapping[str, Sequence[tuple[float, float]]]  # label text, e.g. 'model="m1"' -> samples


def counter_samples(per_s: float, now_s: int, since_s: int = 3600
                    ) -> list[tuple[float, float]]:
    """A counter growing by ``per_s`` a second from ``since_s`` before ``now_s`` to an hour
    after it, sampled every 15 s."""
    return [(float(t), per_s * (t - now_s + since_s))
            for t in range(now_s - since_s, now_s + 3600, 15)]


def gauge_samples(value: float, now_s: int, per_s: float = 0.0) -> list[tuple[float, float]]:
    """A gauge at ``value`` at ``now_s``, changing by ``per_s`` a second, from an hour before
    it to an hour after it, sampled every 15 s."""
    return [(float(t), value + per_s * (t - now_s)) for t in range(now_s - 3600, now_s + 3600, 15)]


def openmetrics(families: Sequence[Family]) -> str:
    lines: list[str] = []
    for fam in families:
        lines.append(f"# TYPE {fam.name} unknown")
        for labels, samples in fam.series.items():
            lines += [f"{fam.name}{{{labels}}} {v!r} {t:.3f}" for t, v in samples]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def prometheus(tmp: Path, families: Sequence[Family], scrape: Sequence[str] = (),
               route_prefix: str = "", basic_auth: tuple[str, str] | None = None,
               tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """Prometheus backfilled with ``families`` and scraping the ``scrape`` targets (HOST:PORT,
    every second); yields its base URL. ``route_prefix`` (e.g. ``/prom``) serves it under a path,
    as behind a proxy; ``basic_auth`` (user, bcrypt hash) requires that user (the URL yielded
    has no credentials); ``tls`` (certificate, key files) serves https."""
    data = tmp / "tsdb"
    data.mkdir(parents=True)
    if families:
        source = tmp / "backfill.om"
        source.write_text(openmetrics(families))
        subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source),
                        str(data)], check=True, capture_output=True, timeout=120)
    config = tmp / "prometheus.yml"
    jobs = "".join(f"  - job_name: target{i}\n    scrape_interval: 1s\n    static_configs:\n"
                   f"      - targets: ['{target}']\n" for i, target in enumerate(scrape))
    config.write_text("global:\n  scrape_interval: 15s\n"
                      + (f"scrape_configs:\n{jobs}" if jobs else ""))
    port = free_port()
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}{route_prefix}"
    flags = [f"--web.route-prefix={route_prefix}", f"--web.external-url={url}"] \
        if route_prefix else []
    web_config = ""
    if basic_auth is not None:
        web_config += f"basic_auth_users:\n  {basic_auth[0]}: '{basic_auth[1]}'\n"
    if tls is not None:
        web_config += f"tls_server_config:\n  cert_file: {tls[0]}\n  key_file: {tls[1]}\n"
    if web_config:
        web = tmp / "web.yml"
        web.write_text(web_config)
        flags.append(f"--web.config.file={web}")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=3650d",
         "--log.level=warn", *flags],
        stdout=subprocess.DEVNULL, stderr=(tmp / "prometheus.log").open("w"))
    try:
        wait_ready(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}")
        try:
            unverified = ssl._create_unverified_context()  # readiness only, not the test's reads
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2,
                                        context=unverified) as response:
                if response.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code == 401:  # up, behind basic auth
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"prometheus at {url} not ready within {timeout_s} s")


class Silent:
    """A Prometheus that accepts connections and never answers (one overloaded, or behind a
    proxy that holds the request): each request waits out the client's timeout. Counts them."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with suppress(OSError):
            while True:
                self.held.append(self.listener.accept()[0])

    def close(self) -> None:
        for held in [*self.held, self.listener]:
            held.close()
