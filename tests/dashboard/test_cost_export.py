"""Cost read from a store the real core filled: totals against the simulator's own billing,
the OpenCost-layout CSV, and the `headroom cost export` command."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dashboard_support import Gapped, Seeded, seed_store
from typer.testing import CliRunner

from controlplane import cost_export, cost_reader
from controlplane.cli.cost import app as cost_app
from controlplane.domain.cost import CostCategory
from controlplane.store import Store
from controlplane.store.engine import make_engine


def test_showback_dollars_match_what_the_simulated_fleet_billed(seeded: Seeded) -> None:
    engine = make_engine(seeded.url)
    first_at, _ = cost_reader.time_span(engine) or pytest.fail("no ticks")
    result = cost_export.showback(engine, cost_reader.price_table(engine), first_at,
                                  seeded.end_at, step_s=60)
    gpu_hours = sum(a.gpu_hours for a in result.accruals)
    usd = sum(a.usd for a in result.accruals)
    # sampled once a minute against the simulator's 10-second billing steps
    assert gpu_hours == pytest.approx(seeded.sim_gpu_hours, rel=0.03)
    assert usd == pytest.approx(seeded.sim_cost_usd, rel=0.03)
    assert {a.day for a in result.accruals} == {"2026-03-02", "2026-03-03"}
    serving = {a.model for a in result.accruals if a.category is CostCategory.SERVING}
    assert {"llama-3-8b-chat", "llama-3-70b", "bert-embed"} <= serving


def test_csv_rows_carry_opencost_columns_tenants_and_idle(seeded: Seeded, tmp_path: Path) -> None:
    engine = make_engine(seeded.url)
    result = cost_export.showback(engine, cost_reader.price_table(engine),
                                  seeded.end_at - timedelta(hours=2), seeded.end_at, 300)
    rows = cost_export.opencost_rows(result.accruals, result.requests)
    path = tmp_path / "showback.csv"
    path.write_text(cost_export.csv_text(rows), encoding="utf-8")
    with path.open() as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        read = list(reader)
    assert tuple(header[: len(cost_export.OPENCOST_COLUMNS)]) == cost_export.OPENCOST_COLUMNS
    by_name = {(r["Namespace"], r["ControllerName"], r["Date"], r["GPUProduct"]): r for r in read}
    llama = by_name[("initech", "llama-3-70b", "2026-03-03", "H100-80GB")]
    labels = json.loads(llama["Labels"])
    assert labels["headroom_io_tenant"] == "initech"
    assert labels["app"] == "llama-3-70b"
    assert float(llama["Requests"]) > 0
    assert float(llama["CostPer1MRequests"]) == pytest.approx(
        float(llama["TotalCost"]) / float(llama["Requests"]) * 1e6, rel=1e-4)
    assert any(r["Namespace"] == "__idle__" and r["Category"] == "idle" for r in read)
    total = sum(float(r["TotalCost"]) for r in read)
    assert total == pytest.approx(sum(a.usd for a in result.accruals), rel=1e-6)


def test_cost_export_command_writes_the_csv_for_the_configured_store(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    out = tmp_path / "export.csv"
    result = CliRunner().invoke(cost_app, ["export", "--out", str(out), "--days", "1",
                                           "--step-s", "120"])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    lines = out.read_text().splitlines()
    assert lines[0].startswith("Date,Namespace,ControllerKind,ControllerName")
    assert len(lines) > 10


def test_cost_export_rejects_a_malformed_until_naming_the_option(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    result = CliRunner().invoke(cost_app, ["export", "--out", str(tmp_path / "x.csv"),
                                                "--until", "soon"])
    assert result.exit_code == 2
    assert "--until" in result.output


def test_cost_export_refuses_an_until_out_of_range_in_utc_naming_the_option(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    result = CliRunner().invoke(cost_app, ["export", "--out", str(tmp_path / "x.csv"),
                                           "--until", "0001-01-01T00:00:00+01:00"])
    assert result.exit_code == 2
    assert "--until '0001-01-01T00:00:00+01:00': out of range in UTC" in result.output
    assert not (tmp_path / "x.csv").exists()


def _export(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cost_app, ["export", *args])
    return result.exit_code, " ".join(result.output.split())



@pytest.mark.parametrize("name", ["a[/]b.csv", "[bold]c.csv"])
def test_cost_export_names_an_out_path_that_looks_like_rich_markup_as_written(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    out = tmp_path / name
    code, output = _export("--out", str(out), "--days", "0.1", "--step-s", "600")
    assert code == 0, output  # before: MarkupError after the file was written, or "c.csv"
    assert f"wrote {len(out.read_text().splitlines()) - 1} rows to {out}:" in output

def test_cost_export_refuses_to_overwrite_the_store_it_reads(
        seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    store_file = Path(seeded.url.removeprefix("sqlite:///"))
    before = store_file.read_bytes()
    code, output = _export("--out", str(store_file))
    assert code == 2
    assert f"--out {store_file}: is the input file of the store (db.url)" in output
    assert store_file.read_bytes() == before


def test_cost_export_refuses_the_stores_write_ahead_log_as_its_output(
        seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    wal = Path(seeded.url.removeprefix("sqlite:///") + "-wal")
    code, output = _export("--out", str(wal))
    assert code == 2
    assert f"--out {wal}: is the input file of the store's -wal file (db.url)" in output


@pytest.mark.parametrize(("out", "expected"), [
    ("dir", "--out {tmp}/dir: is a directory"),
    ("file.txt/export.csv", "--out {tmp}/file.txt/export.csv: a parent of it is a file"),
    ("/proc/export.csv", "--out /proc/export.csv: cannot write in the directory /proc: "),
], ids=["a directory", "under a file", "in /proc, which permissions let root write"])
def test_cost_export_names_an_out_path_it_cannot_write_before_reading_the_store(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str,
        expected: str) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    (tmp_path / "dir").mkdir()
    (tmp_path / "file.txt").write_text("keep me")
    code, output = _export("--out", str(tmp_path / out))
    assert code == 2
    assert expected.format(tmp=tmp_path) in output
    assert "Traceback" not in output
    assert (tmp_path / "file.txt").read_text() == "keep me"


def test_a_failed_cost_export_write_leaves_the_previous_file_as_it_was(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    out = tmp_path / "export.csv"
    out.write_text("previous export\n")

    def disk_full(_rows: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cost_export, "csv_text", disk_full)
    code, output = _export("--out", str(out), "--days", "0.1", "--step-s", "600")
    assert code == 2
    assert f"--out {out}: cannot write: No space left on device" in output
    assert out.read_text() == "previous export\n"
    assert [p.name for p in tmp_path.iterdir()] == ["export.csv"]


def test_cost_export_refuses_an_until_before_the_first_tick_and_writes_nothing(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    out = tmp_path / "export.csv"
    code, output = _export("--out", str(out), "--until", "2000-01-01")
    assert code == 2
    assert "--until 2000-01-01: at or before the store's first tick" in output
    assert not out.exists()


def test_cost_export_with_an_until_after_the_last_tick_stops_at_the_last_tick(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    default, later = tmp_path / "default.csv", tmp_path / "later.csv"
    assert _export("--out", str(default), "--days", "0.1", "--step-s", "600")[0] == 0
    code, output = _export("--out", str(later), "--days", "0.1", "--step-s", "600",
                           "--until", "2099-01-01")
    assert code == 0, output
    assert "2099" not in output  # nothing is known after the last tick
    assert later.read_text() == default.read_text()


@pytest.mark.parametrize("option", ["--days", "--step-s"])
def test_cost_export_refuses_an_unbounded_window_or_step_naming_the_option(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    code, output = _export("--out", str(tmp_path / "x.csv"), option, "inf")
    assert code == 2
    assert f"Invalid value for '{option}'" in output


def test_cost_export_of_a_missing_store_file_names_it_and_creates_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    code, output = _export("--out", str(tmp_path / "x.csv"))
    assert code == 2
    assert f"store {url}: no such database file" in output
    assert list(tmp_path.iterdir()) == []



@pytest.mark.parametrize(("store", "args", "code"), [
    ("missing", (), 2), ("without ticks", (), 1), ("seeded", ("--until", "2000-01-01"), 2)])
def test_a_refused_cost_export_leaves_no_directory_of_its_out_path_behind(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str,
        args: tuple[str, ...], code: int) -> None:
    url = seeded.url if store == "seeded" else f"sqlite:///{tmp_path / 'store.db'}"
    if store == "without ticks":
        Store.open(url, migrate=True).engine.dispose()
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    out = tmp_path / "out" / "a" / "b.csv"
    assert _export("--out", str(out), *args)[0] == code
    assert not (tmp_path / "out").exists()  # before: out/ and out/a/ were made
    if store == "seeded":  # an export that is not refused makes them
        assert _export("--out", str(out), "--days", "0.1", "--step-s", "600")[0] == 0
        assert out.is_file()

def test_cost_export_of_a_store_without_schema_says_to_run_db_upgrade(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_engine(store_url).dispose()  # an empty database: no Headroom tables
    monkeypatch.setenv("HEADROOM_DB__URL", store_url)
    out = tmp_path / "x.csv"
    code, output = _export("--out", str(out))
    assert code == 2
    assert "has no Headroom schema (db.url from environment HEADROOM_DB__URL); run `headroom db " \
        "upgrade`" in output
    assert not out.exists()


@pytest.mark.parametrize("namespace", ["", "Headroom", "warm pool", "a" * 64])
def test_cost_export_refuses_a_warm_namespace_kubernetes_would_not_accept(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespace: str) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    out = tmp_path / "x.csv"
    code, output = _export("--out", str(out), "--warm-namespace", namespace)
    assert code == 2
    assert f"--warm-namespace {namespace!r}: not a Kubernetes namespace name" in output
    assert not out.exists()


def test_one_tick_stamped_a_year_ahead_does_not_move_the_export_window_past_the_newest_tick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'skewed.db'}"
    runtime = seed_store(url, 0.25)
    last_at = runtime.clock.now()
    with make_engine(url).begin() as connection:  # one tick written under a skewed clock
        connection.exec_driver_sql(
            "UPDATE ticks SET started_at = '2027-03-02 21:05:00.000000' "
            "WHERE id = (SELECT min(id) + 10 FROM ticks)")
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    out = tmp_path / "skewed.csv"
    code, output = _export("--out", str(out), "--days", "1", "--step-s", "60")
    assert code == 0, output
    assert "2027" not in output  # the window ends at the newest tick, as on the dashboard
    assert f"{last_at:%Y-%m-%d %H:%M} UTC" in " ".join(output.split())


def test_days_of_a_window_starting_mid_second_end_at_midnight_where_the_next_begins() -> None:
    since_at = datetime(2026, 3, 1, 22, 15, 7, 500_000, tzinfo=UTC)
    until_at = datetime(2026, 3, 3, 1, 0, tzinfo=UTC)
    spans = cost_export.day_spans(["2026-03-02", "2026-03-01", "2026-03-03", "2026-03-02"],
                                  since_at, until_at)
    assert spans == [
        ("2026-03-01", since_at, datetime(2026, 3, 2, tzinfo=UTC)),
        ("2026-03-02", datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 3, tzinfo=UTC)),
        ("2026-03-03", datetime(2026, 3, 3, tzinfo=UTC), until_at),
    ]


def test_days_the_control_plane_was_down_are_marked_in_the_export_and_named_in_its_output(
        gapped: Gapped, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", gapped.url)
    out = tmp_path / "gapped.csv"
    code, output = _export("--out", str(out), "--days", "7", "--step-s", "600")
    assert code == 0, output
    assert (f"no plan recorded from {gapped.gap_start_at:%Y-%m-%d %H:%M:%S} to "
            f"{gapped.gap_end_at:%Y-%m-%d %H:%M:%S} UTC (72.0 h)") in output
    with out.open() as handle:
        read = list(csv.DictReader(handle))
    hours_by_day = {(r["Date"], float(r["UnrecordedHours"])) for r in read}
    first_midnight, last_midnight = datetime(2026, 3, 3, tzinfo=UTC), datetime(2026, 3, 5,
                                                                              tzinfo=UTC)
    assert hours_by_day == {
        ("2026-03-02", round((first_midnight - gapped.gap_start_at) / timedelta(hours=1), 6)),
        ("2026-03-03", 24.0), ("2026-03-04", 24.0),
        ("2026-03-05", round((gapped.gap_end_at - last_midnight) / timedelta(hours=1), 6))}


def test_a_store_ticking_without_a_gap_marks_no_hour_unrecorded(seeded: Seeded) -> None:
    engine = make_engine(seeded.url)
    first_at, _ = cost_reader.time_span(engine) or pytest.fail("no ticks")
    result = cost_export.showback(engine, cost_reader.price_table(engine), first_at,
                                  seeded.end_at, step_s=600)
    assert result.unrecorded == ()
    rows = cost_export.opencost_rows(result.accruals, result.requests)
    assert {r["UnrecordedHours"] for r in rows} == {"0"}


def test_cost_export_reads_the_sqlite_store_db_names_as_status_and_hint_do(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store_file = Path(seeded.url.removeprefix("sqlite:///"))
    # --db beats the environment
    monkeypatch.setenv("HEADROOM_DB__URL", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    out = tmp_path / "export.csv"
    code, output = _export("--out", str(out), "--days", "1", "--db", str(store_file))
    assert code == 0, output
    assert out.read_text().startswith("Date,Namespace,ControllerKind,ControllerName")


def test_cost_export_of_a_missing_default_store_beside_a_demo_store_says_to_pass_db(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo_store = tmp_path / ".headroom" / "demo.db"
    demo_store.parent.mkdir()
    demo_store.write_bytes(b"")
    monkeypatch.delenv("HEADROOM_DB__URL", raising=False)
    monkeypatch.chdir(tmp_path)
    code, output = _export("--out", "x.csv")
    assert code == 2
    assert ("`headroom demo` keeps its store in .headroom/demo.db: pass --db .headroom/demo.db"
            in " ".join(output.split()))
    assert not (tmp_path / "headroom.db").exists() and not (tmp_path / "x.csv").exists()


def test_cost_export_with_a_config_pricing_a_pool_otherwise_notes_the_store_price_is_used(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", seeded.url)
    stored = cost_reader.price_table(make_engine(seeded.url)).price_of("L4").usd_per_gpu_hour
    pools = "pools:\n  - {name: l4, product: L4, gpus_per_node: 4, max_nodes: 8, "
    other, same = tmp_path / "other.yaml", tmp_path / "same.yaml"
    other.write_text(f"{pools}price_per_gpu_hour: {stored + 1}}}\n", encoding="utf-8")
    same.write_text(f"{pools}price_per_gpu_hour: {stored}}}\n", encoding="utf-8")
    code, output = _export("--out", str(tmp_path / "x.csv"), "--config", str(other))
    assert code == 0, output
    assert (f"note: --config prices pool l4 (L4) at ${stored + 1:g}/GPU-h, the store's price "
            f"in force is ${stored:g}") in output
    assert "the store's is used; a price takes effect once `headroom serve` or `headroom demo` "\
           "applies it" in output
    code, output = _export("--out", str(tmp_path / "y.csv"), "--config", str(same))
    assert code == 0, output
    assert "note: --config prices" not in output
