"""Cost read from a store the real core filled: totals against the simulator's own billing,
the OpenCost-layout CSV, and the `headroom cost export` command."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest
from dashboard_support import Seeded
from typer.testing import CliRunner

from controlplane import cost_export, cost_reader
from controlplane.cli.cost import app as cost_app
from controlplane.domain.cost import CostCategory
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
    assert cost_export.write_csv(rows, path) == len(rows)
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
