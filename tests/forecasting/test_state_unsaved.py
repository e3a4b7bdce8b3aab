"""A forecast run whose fitted state cannot be saved says so, and exits non-zero.

The state dir's writes fail for real, also as root (where chmod stops nothing): in-process, the
state dir is a path under a regular file (the kernel refuses with ENOTDIR); for the CLI, which
checks its state dir before any fit, a subprocess runs with RLIMIT_FSIZE at 1 byte, so the
check (an empty temp file) passes and every state file's write fails (EFBIG), as on a disk that
fills up during a run. Python ignores SIGXFSZ, and the subprocess writes nothing else but pipes.
A read-only state dir is a read-only bind mount in a mount namespace of the CLI's own
(``unshare -m``, as root: the tests run as root), so the kernel refuses its writes with EROFS.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from controlplane.forecast_job import JobConfig, run_job
from controlplane.forecast_refresh import refresh_forecasts
from controlplane.settings import load_settings
from controlplane.store import Store
from tests.forecasting.builders import diurnal, long_csv
from tests.forecasting.test_forecast_job import MODELS, NOW, filled_store

#: ``headroom`` with every file it writes limited to 1 byte
HEADROOM_ON_A_FULL_DISK = [sys.executable, "-c", (
    "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, "
    "(1, resource.getrlimit(resource.RLIMIT_FSIZE)[1])); "
    "from controlplane.cli import main; main()")]


def _unwritable(tmp_path: Path) -> Path:
    (tmp_path / "a-file").write_text("")
    return tmp_path / "a-file" / "state"


def test_a_run_that_cannot_save_state_stores_every_forecast_and_counts_the_unsaved_models(
        sqlite_url: str, tmp_path: Path) -> None:
    store = filled_store(sqlite_url)
    config = JobConfig(method="level", history_s=2 * 86_400, state_dir=_unwritable(tmp_path))
    report = run_job(store, store, NOW, config)
    assert not report.failed and len(report.forecasts) == len(MODELS)
    assert sorted(store.latest_forecasts()) == sorted(MODELS)  # nothing lost
    assert report.state_unsaved == len(MODELS)
    assert report.state_error == os.strerror(errno.ENOTDIR)


def test_a_run_that_saves_its_state_reports_nothing_unsaved(sqlite_url: str,
                                                             tmp_path: Path) -> None:
    store = filled_store(sqlite_url)
    config = JobConfig(method="persistence", history_s=86_400, state_dir=tmp_path / "state")
    report = run_job(store, None, NOW, config)
    assert report.state_unsaved == 0 and report.state_error == ""
    assert len(list((tmp_path / "state").glob("*.json"))) == len(MODELS)


def test_a_serve_refresh_that_cannot_save_state_logs_one_warning_event_naming_dir_and_error(
        sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = filled_store(sqlite_url)
    state = _unwritable(tmp_path)
    settings = load_settings(forecast={"method": "persistence", "history_s": 86_400,
                                       "state_dir": str(state)})
    with caplog.at_level(logging.WARNING, logger="headroom"):
        forecasts = refresh_forecasts(store, store, NOW, settings)
    assert len(forecasts) == len(MODELS)
    events = [r for r in caplog.records if r.getMessage() == "forecast.state_unsaved"]
    assert len(events) == 1
    event = events[0]
    assert event.levelno == logging.WARNING
    fields = event.__dict__  # the extra= of the log call
    assert (fields["state_dir"], fields["models"], fields["of_models"], fields["error"]) == (
        str(state), len(MODELS), len(MODELS), os.strerror(errno.ENOTDIR))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "forecast.state_unsaved"]  # the one line: no per-model line, nothing about pruning


def _run_on_a_full_disk(tmp_path: Path, models: dict[str, npt.NDArray[np.float64]], *extra: str
                        ) -> subprocess.CompletedProcess[str]:
    trace = long_csv(tmp_path / "t.csv", models, 600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    return subprocess.run([
        *HEADROOM_ON_A_FULL_DISK, "forecast", "run", "--csv", str(trace), "--no-store",
        "--step", "10m", "--history", "3d", "--method", "persistence", "--workers", "1",
        "--state-dir", str(tmp_path / "s"), *extra],
        env={**env, "COLUMNS": "400"}, cwd=tmp_path, capture_output=True, text=True,
        timeout=300)


def test_forecast_run_on_a_full_disk_names_the_state_dir_and_the_error_and_exits_3(
        tmp_path: Path) -> None:
    done = _run_on_a_full_disk(tmp_path, {"x": diurnal(3, 600), "y": diurnal(3, 600, seed=5)},
                               "--json")
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["failed"] == {} and doc["forecasts"] == 2
    assert doc["state_unsaved"] == 2 and doc["state_error"] == os.strerror(errno.EFBIG)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: --state-dir {tmp_path / 's'}: cannot save fitted state "
        f"({os.strerror(errno.EFBIG)}) of 2 of 2 model(s); their forecasts were made, but every "
        "run refits them until the state dir takes writes again"]
    assert list((tmp_path / "s").iterdir()) == []  # no half-written temp file left


def test_forecast_run_with_a_failed_model_on_a_full_disk_exits_1_and_still_names_the_state(
        tmp_path: Path) -> None:
    done = _run_on_a_full_disk(tmp_path, {"x": diurnal(3, 600), "neg": -diurnal(3, 600)})
    assert done.returncode == 1, done.stderr  # a model without a forecast comes first
    assert "warning: model 'neg':" in done.stderr
    assert f"error: --state-dir {tmp_path / 's'}: cannot save fitted state " \
           f"({os.strerror(errno.EFBIG)}) of 1 of 2 model(s)" in done.stderr


#: ``headroom`` with the directory of its first argument bind-mounted read-only (in a mount
#: namespace of its own, so the mount goes with the process)
HEADROOM_ON_A_READ_ONLY_DIR = ["unshare", "-m", "sh", "-c",
                               'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && '
                               'shift && exec "$@"', "sh"]


@pytest.mark.parametrize("state", ["ro", "ro/not-yet"], ids=["existing", "to-be-created"])
def test_forecast_run_on_a_read_only_state_dir_stores_every_forecast_and_exits_3_naming_it(
        tmp_path: Path, sqlite_url: str, state: str) -> None:
    Store.open(sqlite_url, migrate=True)
    (tmp_path / "ro").mkdir()
    trace = long_csv(tmp_path / "t.csv", {"x": diurnal(3, 600), "y": diurnal(3, 600, seed=5)},
                     600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    done = subprocess.run([
        *HEADROOM_ON_A_READ_ONLY_DIR, str(tmp_path / "ro"), sys.executable, "-c",
        "from controlplane.cli import main; main()", "forecast", "run", "--csv", str(trace),
        "--store", sqlite_url, "--step", "10m", "--history", "3d", "--method", "level",
        "--workers", "1", "--fit-budget-s", "0", "--state-dir", str(tmp_path / state),
        "--json"], env={**env, "COLUMNS": "400"}, cwd=tmp_path, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["failed"] == {} and doc["forecasts"] == 2
    assert doc["stored"] is True
    assert doc["state_unsaved"] == 2 and doc["state_error"] == os.strerror(errno.EROFS)
    assert doc["refits"] == 2 and doc["deferred"] == 0  # no state ever: no fit waits for one
    assert sorted(Store.open(sqlite_url).latest_forecasts()) == ["x", "y"]
    lines = done.stderr.splitlines()
    assert lines[0] == (f"warning: --state-dir {tmp_path / state}: cannot write there "
                        f"({os.strerror(errno.EROFS)}); every model is fitted without stored "
                        "state, none is saved")
    assert [line for line in lines if line.startswith("error:")] == [
        f"error: --state-dir {tmp_path / state}: cannot save fitted state "
        f"({os.strerror(errno.EROFS)}) of 2 of 2 model(s); their forecasts were stored, but "
        "every run refits them until the state dir takes writes again"]
    assert list((tmp_path / "ro").iterdir()) == []
