"""`headroom dashboard`: bad options are refused before Streamlit starts, and a missing store
file is left for the pages to explain, not created."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clihelpers import HEADROOM, WARM_HEADROOM, _env, taken_port

from controlplane.cli.dashboard_command import dashboard_environment
from controlplane.settings import CONFIG_FILE_ENV, load_inherited_settings, load_settings


def _dashboard(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = _env(HEADROOM_DB__URL=f"sqlite:///{tmp_path / 'store.db'}", COLUMNS="400")
    return subprocess.run([*WARM_HEADROOM, "dashboard", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_dashboard_port_out_of_range_is_refused_naming_the_option(tmp_path: Path,
                                                                    port: str) -> None:
    run = _dashboard(tmp_path, "--port", port)
    assert run.returncode == 2
    assert "Invalid value for '--port': Input should be" in run.stderr
    assert "Traceback" not in run.stderr and "dashboard on" not in run.stderr


def test_an_address_the_dashboard_cannot_bind_is_one_line_naming_the_option(
        tmp_path: Path) -> None:
    run = _dashboard(tmp_path, "--address", "256.0.0.1")
    assert run.returncode == 2
    assert run.stderr.startswith("error: --address 256.0.0.1: '256.0.0.1:8501': cannot resolve "
                                 "'256.0.0.1' (")
    assert run.stderr.count("\n") == 1


def test_a_dashboard_address_from_the_config_file_is_named_by_its_setting(
        tmp_path: Path) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("dashboard:\n  address: 256.0.0.1\n")
    run = _dashboard(tmp_path, "--config", str(config))
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: {config}: dashboard.address 256.0.0.1: ")


def test_a_taken_dashboard_port_is_one_line_naming_the_option_before_any_url(
        tmp_path: Path) -> None:
    # before: "dashboard on http://127.0.0.1:P" (another server's URL), then Streamlit's own
    # "Port P is not available" and exit 1
    with taken_port() as port:
        run = _dashboard(tmp_path, "--port", str(port))
        config = tmp_path / "headroom.yaml"
        config.write_text(f"dashboard:\n  port: {port}\n")
        from_file = _dashboard(tmp_path, "--config", str(config))
    assert run.returncode == 2
    assert run.stderr.startswith(f"error: --port {port}: '127.0.0.1:{port}': port {port} is "
                                 "taken (")
    assert run.stderr.count("\n") == 1 and "dashboard on" not in run.stdout + run.stderr
    assert from_file.returncode == 2
    assert from_file.stderr.startswith(f"error: {config}: dashboard.port {port}: ")


def test_dashboard_port_0_names_the_free_port_it_serves_on(tmp_path: Path) -> None:
    env = _env(HEADROOM_DB__URL=f"sqlite:///{tmp_path / 'store.db'}", COLUMNS="400")
    child = subprocess.Popen([*HEADROOM, "dashboard", "--port", "0"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert child.stdout is not None
        first = child.stdout.readline()  # printed before Streamlit starts
    finally:
        child.terminate()
        child.wait(timeout=30)
    assert first.startswith("dashboard on http://127.0.0.1:"), first
    port = int(first.split("http://127.0.0.1:")[1].split()[0])
    assert port > 0, first  # before: "http://127.0.0.1:0"


def test_the_dashboard_command_does_not_create_a_missing_store_file(tmp_path: Path) -> None:
    run = _dashboard(tmp_path, "--address", "256.0.0.1")  # stops after the store check
    assert run.returncode == 2
    assert list(tmp_path.iterdir()) == []


def test_dashboard_db_names_the_sqlite_store_as_status_db_does_beating_the_environment(
        tmp_path: Path) -> None:
    # HEADROOM_DB__URL names a missing file (the pages would explain it); --db names a file that
    # is no store, and the one-line error is about that file: --db is the store read
    not_a_store = tmp_path / "demo.db"
    not_a_store.write_text("not a database\n" * 100)
    run = _dashboard(tmp_path, "--db", str(not_a_store))
    assert run.returncode == 2
    assert run.stderr.startswith("error: ")
    assert f"sqlite:///{not_a_store}" in run.stderr
    assert "dashboard on" not in run.stdout + run.stderr


def test_the_dashboards_pages_load_the_settings_file_given_to_headroom_dashboard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "headroom.yaml"
    config.write_text("reconcile: {interval_s: 120}\ndashboard: {query_timeout_s: 7}\n")
    monkeypatch.chdir(tmp_path)
    child = dashboard_environment({"PATH": "/bin"}, "sqlite:///store.db", Path("headroom.yaml"))
    assert child["HEADROOM_DB__URL"] == "sqlite:///store.db"
    assert child[CONFIG_FILE_ENV] == str(config)  # absolute
    monkeypatch.chdir("/")
    settings = load_inherited_settings(child)
    assert settings.reconcile.interval_s == 120
    assert settings.dashboard.query_timeout_s == 7
    monkeypatch.setenv(CONFIG_FILE_ENV, child[CONFIG_FILE_ENV])  # as the Streamlit child runs
    assert load_inherited_settings().reconcile.interval_s == 120  # the variable is no mistake


def test_without_config_the_dashboard_child_loads_no_file_even_if_one_was_inherited() -> None:
    child = dashboard_environment({CONFIG_FILE_ENV: "/elsewhere.yaml"}, "sqlite://", None)
    assert CONFIG_FILE_ENV not in child
    inherited = load_inherited_settings(child)
    assert inherited.reconcile.interval_s == load_settings().reconcile.interval_s


def test_no_dashboard_page_loads_settings_without_the_dashboards_settings_file() -> None:
    pages = Path(__file__).resolve().parents[2] / "dashboard"
    loading = sorted(str(p.relative_to(pages)) for p in pages.rglob("*.py")
                     if "load_settings(" in p.read_text())
    assert loading == []
    assert "load_inherited_settings()" in (pages / "context.py").read_text()
