"""One simulated fleet per store: real `headroom serve --backend sim` processes on one store
(SQLite and PostgreSQL). A second is refused while the first runs, a clean stop frees the store
at once, and a holder that stopped renewing is taken over after the lease duration."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from clihelpers import HEADROOM, WARM_HEADROOM, _env, _free_port
from sqlalchemy import func, inspect, select, table

from controlplane.domain.lease import LeaseRecord
from controlplane.store import Store
from controlplane.store.engine import redact
from controlplane.store.lease import SqlLeaseStore


def _with_password(url: str) -> str:
    """A PostgreSQL URL with a password (trust auth ignores it), which no message may show."""
    return url.replace("postgres@", "postgres:s3cret@")


#: longer than any start here takes (a few seconds), yet short enough that the refused start
#: sees the holder renew soon (every lease_s * 2/9 s: a refusal waits for a renewal it watches)
LONG_LEASE_S = 30


def _config(tmp_path: Path, url: str, *, interval_s: float, lease_s: int) -> Path:
    config = tmp_path / f"headroom-{interval_s}-{lease_s}.yaml"
    config.write_text(f"backend: sim\ndb:\n  url: {url}\n  lease_duration_s: {lease_s}\n"
                      f"reconcile:\n  interval_s: {interval_s}\n"
                      f"  max_staleness_s: {max(interval_s, 30)}\n"
                      f"  max_forecast_age_s: {max(interval_s, 1800)}\n"
                      f"forecast:\n  interval_s: {max(interval_s, 300)}\n"
                      "sim:\n  history_s: 3600\n")
    return config


def _serve(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = _env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{_free_port()}")
    with log.open("wb") as stderr:
        return subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=env,
                                stdout=subprocess.DEVNULL, stderr=stderr)


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def _identity(proc: subprocess.Popen[bytes]) -> str:
    return f"{socket.gethostname()}-{proc.pid}"


def _lease(url: str) -> LeaseRecord | None:
    store = Store.open(url)
    try:
        return SqlLeaseStore(store.engine).read_lease("sim-fleet")
    finally:
        store.engine.dispose()


def _rows(url: str) -> dict[str, int]:
    """Rows per table, but the lease's (its holder renews it)."""
    store = Store.open(url)
    try:
        names = [n for n in inspect(store.engine).get_table_names() if n != "leases"]
        with store.engine.connect() as connection:
            return {n: connection.execute(select(func.count()).select_from(table(n))).scalar_one()
                    for n in names}
    finally:
        store.engine.dispose()


def _until(proc: subprocess.Popen[bytes], predicate: Callable[[], bool], timeout_s: float,
           log: Path) -> None:
    """Wait for ``predicate`` while ``proc`` runs; a process that exited fails with its log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if predicate():
                return
        except Exception:  # the store not made yet, or not migrated yet
            pass
        time.sleep(0.3)
    raise AssertionError(f"condition not met within {timeout_s} s")


def _holds(url: str, proc: subprocess.Popen[bytes]) -> bool:
    lease = _lease(url)
    return lease is not None and lease.holder == _identity(proc)


def _events(log: Path, name: str) -> list[dict[str, object]]:
    lines = (json.loads(line) for line in log.read_text().splitlines() if line.startswith("{"))
    return [e for e in lines if e.get("event") == name]


def test_a_second_serve_on_a_store_another_serve_runs_exits_2_and_writes_nothing(
        tmp_path: Path, store_url: str) -> None:
    url = _with_password(store_url)
    config = _config(tmp_path, url, interval_s=3600, lease_s=3)  # one tick, then only renewals
    first = _serve(config, tmp_path / "first.log")
    try:
        _until(first, lambda: _holds(url, first) and _rows(url)["ticks"] >= 1, 90,
               tmp_path / "first.log")
        before = _rows(url)
        second = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(config)],
                                env=_env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{_free_port()}"),
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second.stderr
        assert second.stderr.startswith(
            f"error: {redact(url)}: another process runs this store's simulated fleet: lease "
            f"'sim-fleet' held by {_identity(first)}, renewed "), second.stderr
        assert "s ago; retry after ~" in second.stderr
        assert second.stderr.count("\n") == 1 and "s3cret" not in second.stderr
        assert _rows(url) == before  # no tick, observation, forecast, model or price of its own
        assert _holds(url, first) and first.poll() is None
    finally:
        assert _stop(first) == 0


def test_the_first_serve_keeps_ticking_and_once_it_stops_cleanly_the_next_starts_at_once(
        tmp_path: Path, store_url: str) -> None:
    # a lease far longer than any start here: taking it sooner proves it was released, not expired
    config = _config(tmp_path, store_url, interval_s=1, lease_s=LONG_LEASE_S)
    first = _serve(config, tmp_path / "first.log")
    try:
        _until(first, lambda: _holds(store_url, first) and _rows(store_url)["ticks"] >= 2, 90,
               tmp_path / "first.log")
        refused = subprocess.run([*WARM_HEADROOM, "serve", "--config", str(config)],
                                 env=_env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{_free_port()}"),
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2, refused.stderr
        ticks = _rows(store_url)["ticks"]
        _until(first, lambda: _rows(store_url)["ticks"] >= ticks + 2, 30, tmp_path / "first.log")
    finally:
        assert _stop(first) == 0
    released = _lease(store_url)
    assert released is not None and released.holder == ""
    started_at = time.monotonic()
    after = _serve(config, tmp_path / "after.log")
    try:
        _until(after, lambda: _holds(store_url, after), 60, tmp_path / "after.log")
        assert time.monotonic() - started_at < LONG_LEASE_S  # it did not wait for the lease
        ticks = _rows(store_url)["ticks"]
        _until(after, lambda: _rows(store_url)["ticks"] > ticks, 30, tmp_path / "after.log")
    finally:
        assert _stop(after) == 0
    [taken] = _events(tmp_path / "after.log", "lease.acquired")
    assert (taken["verdict"], taken["previous_holder"]) == ("take_over", "")


def test_a_holder_that_stopped_renewing_is_taken_over_after_the_lease_duration(
        tmp_path: Path, store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    long_ago = datetime(2026, 11, 1, tzinfo=UTC)  # days ago: still watched for the duration
    assert SqlLeaseStore(store.engine).create_lease(
        "sim-fleet", LeaseRecord("crashed-host-1", 3, long_ago, long_ago, 0))
    store.engine.dispose()
    proc = _serve(_config(tmp_path, store_url, interval_s=1, lease_s=3), tmp_path / "serve.log")
    try:
        _until(proc, lambda: _holds(store_url, proc) and _rows(store_url)["ticks"] >= 1, 90,
               tmp_path / "serve.log")
    finally:
        assert _stop(proc) == 0
    [waiting] = _events(tmp_path / "serve.log", "lease.waiting")  # not a silent wait
    assert waiting["holder"] == "crashed-host-1"
    assert isinstance(waiting["silent_s"], int) and 2 <= waiting["silent_s"] <= 3
    [taken] = _events(tmp_path / "serve.log", "lease.acquired")
    assert (taken["verdict"], taken["previous_holder"]) == ("take_over", "crashed-host-1")


def test_a_demo_on_the_store_a_serve_runs_is_refused_the_same_way(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    url = f"sqlite:///{db}"
    serve = _serve(_config(tmp_path, url, interval_s=3600, lease_s=3), tmp_path / "serve.log")
    try:
        _until(serve, lambda: _holds(url, serve) and _rows(url)["ticks"] >= 1, 90,
               tmp_path / "serve.log")
        before = _rows(url)
        demo = subprocess.run([*WARM_HEADROOM, "demo", "--minutes", "5", "--no-dashboard", "--db",
                               str(db)], cwd=tmp_path, env=_env(), capture_output=True,
                              text=True, timeout=120)
        assert demo.returncode == 2, demo.stderr
        assert demo.stderr.startswith(f"error: {url}: another process runs this store's "
                                      f"simulated fleet: lease 'sim-fleet' held by "
                                      f"{_identity(serve)}, renewed "), demo.stderr
        assert _rows(url) == before
    finally:
        assert _stop(serve) == 0



def test_a_stop_sent_as_soon_as_serve_prints_its_address_stops_it_cleanly_and_frees_the_store(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'early.db'}"
    config = _config(tmp_path, url, interval_s=3600, lease_s=15)
    env = _env(HEADROOM_PLACEMENT__LISTEN=f"127.0.0.1:{_free_port()}")
    proc = subprocess.Popen([*HEADROOM, "serve", "--config", str(config)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the supervisor stops it the moment it reads the address
            seen.append(line)
            if line.startswith("placement API (gRPC) on"):
                proc.send_signal(signal.SIGTERM)
                break
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = "".join(seen) + rest
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "placement API (gRPC) on" in stderr
    released = _lease(url)
    assert released is not None and released.holder == ""  # the next start takes it at once
