"""Every page of the dashboard rendered by Streamlit's AppTest over a store the real core filled."""

from __future__ import annotations

import csv
import io
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import streamlit as st
from dashboard_support import (
    GAP_SEED_START_AT,
    Gapped,
    Seeded,
    as_shown,
    seed_store,
    write_timeline,
)
from streamlit.testing.v1 import AppTest

from controlplane import cost_reader
from controlplane.adapters.clock import WallClock
from controlplane.domain.cost import fleet_cost_rate
from controlplane.domain.hints import DemandHint
from controlplane.placement_api import journaled_engine
from controlplane.store import Store
from controlplane.store.engine import make_engine
from controlplane.store.hints import SqlDemandHints
from dashboard import costing
from dashboard.markdown import escape_markdown
from protos.headroom.v1 import placement_pb2 as pb

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
Page = Callable[[str], AppTest]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: str(m.value) for m in at.metric}


def action_table(at: AppTest) -> Any:
    """The Decisions page's flat table of actions (the one with an `at (UTC)` column)."""
    return next(d.value for d in at.dataframe if "at (UTC)" in d.value.columns)


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


@pytest.fixture
def page(dashboard_env: str) -> Page:
    def open_page(path: str) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=120).run()
        if path != "views/overview.py":
            at.switch_page(path).run()
        no_exception(at)
        return at
    return open_page


def test_overview_shows_dollars_per_hour_of_the_newest_plan(page: Page, seeded: Seeded) -> None:
    at = page("views/overview.py")
    engine = make_engine(seeded.url)
    ticks = cost_reader.planned_ticks(engine, seeded.end_at - timedelta(hours=1), seeded.end_at)
    (snapshot,) = cost_reader.snapshots(engine, [(ticks[-1].at, ticks[-1])],
                                        cost_reader.tenants(engine))
    usd = sum(x.usd_per_hour for x in fleet_cost_rate(snapshot, cost_reader.price_table(engine)))
    shown = metrics(at)
    assert shown["$ / h now"] == f"${usd:,.2f}"
    assert shown["GPU allocation"].endswith("%")
    assert shown["$ per 1M requests"].startswith("$")
    assert shown["SLO status"] in {"all ok"} | {f"{n} short" for n in range(1, 7)}
    assert [t.value for t in at.title] == ["Overview"]
    products = set(at.dataframe[0].value["product"])
    assert products == {"A100-80GB", "H100-80GB", "L4"}


def test_fleet_lists_every_gpu_and_draws_the_planned_layouts(page: Page, seeded: Seeded) -> None:
    at = page("views/fleet.py")
    assert {"A100-80GB", "H100-80GB", "L4"} <= set(metrics(at))
    with make_engine(seeded.url).connect() as connection:
        gpus = connection.exec_driver_sql("SELECT count(*) FROM gpus").scalar()
    inventory = at.dataframe[-1].value
    assert len(inventory) == gpus
    assert at.get("vega_lite_chart"), "the layout chart is missing"
    at.selectbox[0].set_value("L4").run()
    no_exception(at)


def _add_l4_gpus(url: str, first: int, count: int) -> None:
    """Whole-GPU placements of bert-embed on L4/<first>.. in the newest plan."""
    with make_engine(url).begin() as connection:
        plan_id = connection.exec_driver_sql("SELECT max(id) FROM plans").scalar()
        for n in range(first, first + count):
            connection.exec_driver_sql(
                "INSERT INTO placements (plan_id, model, gpu_id, product, mode, mig_profile, "
                "mig_start, compute_slices, throughput_rps) "
                "VALUES (?, 'bert-embed', ?, 'L4', 'exclusive', '', 0, 0, 100.0)",
                (plan_id, f"L4/{n}"))


def test_the_chosen_gpu_product_and_page_stay_chosen_when_the_newest_plan_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'growing.db'}"
    seed_store(url, 0.25)
    _add_l4_gpus(url, 100, 90)  # three pages of L4 GPUs
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/fleet.py").run()
    at.selectbox[0].set_value("L4").run()
    at.number_input[0].set_value(2).run()
    _add_l4_gpus(url, 200, 40)  # the plan grows by a page, and stops placing A100s
    with make_engine(url).begin() as connection:
        connection.exec_driver_sql("DELETE FROM placements WHERE product = 'A100-80GB' "
                                   "AND plan_id = (SELECT max(id) FROM plans)")
    st.cache_data.clear()  # as when the cached reads expire
    at.run()
    no_exception(at)
    assert "A100-80GB" not in at.selectbox[0].options
    assert (at.selectbox[0].value, at.number_input[0].value) == ("L4", 2)
    assert "of 4" in at.number_input[0].label


def test_fleet_lists_the_workloads_bound_through_the_placement_api(page: Page,
                                                                  seeded: Seeded) -> None:
    at = page("views/fleet.py")
    assert "No workload is bound through the placement API (Place) on this store." in [
        c.value for c in at.caption]
    engine = journaled_engine(Store.open(seeded.url), WallClock())
    engine.sync_inventory(pb.SyncInventoryRequest(nodes=[pb.Node(
        name="edge-0", cpu_milli=8000, memory_mib=65_536, pool="L4",
        gpus=[pb.Gpu(index=i, product="L4", memory_mib=23_034) for i in range(2)])]))
    bound = [engine.place(pb.PlaceRequest(workload_id=w, model=model, tenant="t", num_gpu=1,
                                          gpu_milli=milli, cpu_milli=100, memory_mib=128,
                                          lease_s=lease_s)).binding
             for w, model, milli, lease_s in (("whisper-a", "whisper", 1000, 0.0),
                                              ("bert-b", "bert-base", 250, 600.0))]
    try:
        at = page("views/fleet.py")
        table = next(d.value for d in at.dataframe if "workload" in d.value.columns)
        assert list(table["workload"]) == ["bert-b", "whisper-a"]
        assert set(table["node"]) == {"edge-0"}
        assert list(table["model"]) == ["bert-base", "whisper"]
        assert list(table["GPUs"]) == [",".join(map(str, b.gpu_indices)) for b in bound[::-1]]
        assert list(table["mode"]) == ["time_slicing", "exclusive"]
        lease_ends = list(table["lease runs out at"])
        assert abs(lease_ends[0].timestamp() - bound[1].lease_expires_at_s) < 1e-3
        assert pd.isna(lease_ends[1])  # whisper-a has no lease
        assert "2 workload(s) on 1 node(s), bound by serving layers through Place" in " ".join(
            c.value for c in at.caption)
        inventory = at.dataframe[-1].value  # still the last table
        assert "workload" not in inventory.columns
    finally:
        for w in ("whisper-a", "bert-b"):
            engine.release(pb.ReleaseRequest(workload_id=w))


def test_models_page_switches_models_and_forecast_leads(page: Page) -> None:
    at = page("views/models.py")
    names = at.selectbox[0].options
    assert len(names) == 6
    assert metrics(at)["WAPE p50 @ 20 min"].endswith("%")
    at.selectbox[0].set_value("llama-3-70b").run()
    at.selectbox[1].set_value(5).run()
    no_exception(at)
    assert "WAPE p50 @ 5 min" in metrics(at)
    at.radio[0].set_value("6 h").run()
    no_exception(at)


def test_the_chosen_model_stays_chosen_when_the_models_busiest_first_order_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'moving.db'}"
    seed_store(url, 0.25)
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/models.py").run()
    names = at.selectbox[0].options
    chosen, quiet = names[-1], names[1]
    at.selectbox[0].set_value(chosen).run()
    with make_engine(url).begin() as connection:  # the store moves on: a quiet model gets busy
        connection.exec_driver_sql(
            "UPDATE observations SET demand_rps = 1e6 WHERE model = ? "
            "AND at = (SELECT max(at) FROM observations)", (quiet,))
    st.cache_data.clear()  # as when the cached reads expire
    at.radio[0].set_value("6 h").run()
    no_exception(at)
    assert at.selectbox[0].options[0] == quiet
    assert at.selectbox[0].value == chosen
    assert at.subheader[0].value.startswith(f"{chosen}: ")


def test_models_page_shows_each_models_offline_and_corrected_throughput_with_the_reason(
        page: Page) -> None:
    at = page("views/models.py")
    table = at.dataframe[-1].value.set_index("name")
    assert {"offline_rps", "corrected_rps", "factor", "profile_reason"} <= set(table.columns)
    mistral = table.loc["mistral-7b-support"]  # really serves 0.6 x its profile in the sim
    assert mistral["offline_rps"] == 18.0
    assert mistral["corrected_rps"] < 0.75 * 18.0
    assert mistral["profile_reason"].split(":")[0] in {"over_slo", "no_evidence"}
    assert table.loc["bert-embed", "corrected_rps"] == table.loc["bert-embed", "offline_rps"]
    at.selectbox[0].set_value("mistral-7b-support").run()
    no_exception(at)
    assert any(c.value.startswith("Throughput per replica at the SLO: 18.00 rps offline")
               for c in at.caption)


def test_cost_page_splits_serving_warm_and_idle_and_offers_the_csv(page: Page) -> None:
    at = page("views/cost.py")
    shown = metrics(at)
    total = _usd(shown["Total"])
    parts = sum(_usd(shown[k]) for k in ("Serving", "Warm", "Idle"))
    assert total > 0
    assert parts == pytest.approx(total, abs=0.05)
    assert at.get("download_button"), "the CSV download button is missing"
    tenants = at.dataframe[0].value
    assert set(tenants["tenant"]) == {"acme", "globex", "initech"}
    at.radio[0].set_value("24 h").run()
    no_exception(at)


def test_cost_page_names_the_stretch_when_no_plan_was_recorded(
        gapped: Gapped, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", gapped.url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/cost.py").run()
    no_exception(at)
    assert [w.value for w in at.warning] == [
        f"No plan was recorded from {gapped.gap_start_at:%Y-%m-%d %H:%M:%S} to "
        f"{gapped.gap_end_at:%Y-%m-%d %H:%M:%S} UTC (72.0 h), e.g. while the control plane "
        "was down: the cost shown there holds the plan in force before, unmeasured. The CSV "
        "marks each day's such hours in its UnrecordedHours column."]
    since_at, until_at = GAP_SEED_START_AT, gapped.gap_end_at + timedelta(minutes=30)
    window = costing.cost_window(gapped.url, since_at, until_at)  # the page's download
    text = costing.export_csv(gapped.url, window.accruals, since_at, until_at, window.unrecorded)
    marked = {(r["Date"], r["UnrecordedHours"]) for r in csv.DictReader(io.StringIO(text))}
    assert {("2026-03-03", "24.0"), ("2026-03-04", "24.0")} <= marked


def test_overview_names_the_stretch_of_its_24_hours_when_no_plan_was_recorded(
        gapped: Gapped, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", gapped.url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    no_exception(at)
    with make_engine(gapped.url).connect() as connection:
        newest_at = connection.exec_driver_sql("SELECT max(started_at) FROM ticks").scalar_one()
    since_at = datetime.fromisoformat(newest_at).replace(tzinfo=UTC) - timedelta(hours=24)
    hours = (gapped.gap_end_at - since_at) / timedelta(hours=1)
    assert [w.value for w in at.warning] == [
        f"No plan was recorded from {since_at:%Y-%m-%d %H:%M:%S} to "
        f"{gapped.gap_end_at:%Y-%m-%d %H:%M:%S} UTC ({hours:.1f} h), e.g. while the control "
        "plane was down: $ per 1M requests holds the plan in force before through it, "
        "unmeasured."]


def test_decisions_page_shows_plan_diffs_with_reasons_and_outcomes(page: Page) -> None:
    at = page("views/decisions.py")
    assert at.expander, "no plan shown"
    actions = action_table(at)
    assert set(actions["outcome"]) <= {"ok", "held back by a guard", "failed",
                                       "failed, will retry", "not applied (dry run)"}
    assert all(actions["reason"].astype(bool))
    units = {"scale_node_pool": "nodes", "set_replicas": "replicas",
             "relayout_mig": "MIG instances", "apply_sharing": "clients per GPU"}
    applied = actions[actions["action"] != "skip"]
    assert not applied.empty
    assert all(change.endswith(units[kind])
               for kind, change in zip(applied["action"], applied["change"], strict=True))
    at.toggle[1].set_value(True).run()
    no_exception(at)
    assert any("No plan matches" in i.value for i in at.info)


def test_dry_run_plans_are_marked_and_never_applied(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'dry.db'}"
    seed_store(url, 0.5, dry_run=True)
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("views/decisions.py").run()
    no_exception(at)
    at.toggle[1].set_value(True).run()
    no_exception(at)
    assert at.expander and all("DRY RUN" in e.label for e in at.expander)
    flat = action_table(at)
    assert set(flat["outcome"]) <= {"not applied (dry run)", "held back by a guard"}
    assert "not applied (dry run)" in set(flat["outcome"])


def test_what_if_compares_policies_dollars_against_short_minutes(
        page: Page, tmp_path: Path) -> None:
    write_timeline(tmp_path / "reactive.csv", minutes=30, replicas=3, gpus_billed=4)
    write_timeline(tmp_path / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(tmp_path)).run()
    no_exception(at)
    table = at.dataframe[0].value.set_index("policy")
    assert table.loc["reactive", "short minutes"] == 20
    assert table.loc["static", "short minutes"] == 0
    price = 5.12  # the seeded store's configured A100-80GB price (the list price too)
    assert table.loc["static", "$"] == pytest.approx(round(30 * 8 / 60 * price, 2))
    assert table.loc["reactive", "GPU-hours"] == pytest.approx(2.0)


def test_what_if_adds_what_the_loop_did_over_the_same_minutes_from_the_store(
        page: Page, seeded: Seeded, tmp_path: Path) -> None:
    from controlplane.recorded_timeline import read_recorded
    from controlplane.simulation.timeline import headline

    since_at = datetime(2026, 3, 2, 21, 30, tzinfo=UTC)  # inside the seeded store's 3.5 hours
    lines = ["minute,model,demand_rps,ready_replicas,per_replica_rps,gpu_per_replica,gpus_billed"]
    lines += [f"{since_at + timedelta(minutes=i):%Y-%m-%d %H:%M:%S},chat,10,1,20,1,4"
              for i in range(30)]
    (tmp_path / "static.csv").write_text("\n".join(lines) + "\n")
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(tmp_path / "static.csv")).run()
    no_exception(at)
    assert list(at.dataframe[0].value["policy"]) == ["static"]  # not unless asked
    at.checkbox[0].check().run()
    no_exception(at)
    table = at.dataframe[0].value.set_index("policy")
    expected = headline(read_recorded(make_engine(seeded.url), None, since_at,
                                      since_at + timedelta(minutes=30)))
    assert expected["minutes"] == 30 and expected["gpu_hours"] > 0
    assert table.loc["recorded", "minutes"] == 30
    assert table.loc["recorded", "GPU-hours"] == pytest.approx(expected["gpu_hours"], abs=0.01)
    assert (table.loc["recorded", "short model-minutes"]
            == expected["short_model_minutes"])


def test_what_if_says_when_the_store_recorded_nothing_over_the_timelines_minutes(
        page: Page, tmp_path: Path) -> None:
    (tmp_path / "static.csv").write_text(
        "minute,model,demand_rps,ready_replicas,per_replica_rps,gpu_per_replica,gpus_billed\n"
        "2025-01-01 00:00:00,chat,10,1,20,1,4\n")  # a year before the seeded store's ticks
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(tmp_path / "static.csv")).run()
    at.checkbox[0].check().run()
    no_exception(at)
    assert [i.value for i in at.info] == [
        "The store recorded no reconcile tick over these minutes."]
    assert list(at.dataframe[0].value["policy"]) == ["static"]


def test_a_bad_timeline_is_reported_by_line_not_by_traceback(page: Page, tmp_path: Path) -> None:
    bad = tmp_path / "broken.csv"
    bad.write_text("minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
                   "0,a,1,1,1,1\n1,a,oops,1,1,1\n")
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(bad)).run()
    no_exception(at)
    assert any(escape_markdown("broken.csv: line 3: demand_rps") in e.value for e in at.error)


def test_a_timeline_too_large_to_add_up_is_an_error_and_the_other_files_still_compare(
        page: Page, tmp_path: Path) -> None:
    write_timeline(tmp_path / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    (tmp_path / "huge.csv").write_text(
        "minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed\n"
        "0,a,1,1,1,1e308\n1,a,1,1,1,1e308\n")
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(tmp_path)).run()
    no_exception(at)
    assert [e.value for e in at.error] == [escape_markdown(
        f"{tmp_path / 'huge.csv'}: policy huge: GPU-hours, dollars too large to add up; the "
        "timeline's values (or the price) are out of range")]
    assert list(at.dataframe[0].value["policy"]) == ["static"]


def test_a_folder_without_timelines_is_named_in_an_error(page: Page, tmp_path: Path) -> None:
    (tmp_path / "results" / "static.csv").mkdir(parents=True)  # a folder, not a timeline
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(tmp_path / "results")).run()
    no_exception(at)
    assert [e.value for e in at.error] == [escape_markdown(
        f"{tmp_path / 'results'}: no .csv or .json file in this folder")]


def test_one_policy_name_from_two_files_is_an_error_and_a_file_listed_twice_counts_once(
        page: Page, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_timeline(tmp_path / "a" / "static.csv", minutes=30, replicas=6, gpus_billed=8)
    second = write_timeline(tmp_path / "b" / "static.csv", minutes=30, replicas=3, gpus_billed=4)
    at = page("views/whatif.py")
    at.text_area[0].set_value(f"{first}\n{first}\n{second}").run()
    no_exception(at)
    assert [e.value for e in at.error] == [escape_markdown(
        f"{second}: policy static is already shown from {first}; rename one of the files (or its "
        "policy values)")]
    assert list(at.dataframe[0].value["policy"]) == ["static"]


def test_a_timeline_that_cannot_be_read_is_an_error_naming_it(
        page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = write_timeline(tmp_path / "locked.csv", minutes=5, replicas=1, gpus_billed=1)
    read_bytes = Path.read_bytes

    def refuse(self: Path) -> bytes:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(locked)).run()
    no_exception(at)
    assert [e.value for e in at.error] == [
        escape_markdown(f"{locked}: cannot read it (Permission denied)")]


def test_a_summary_that_is_not_utf8_is_reported_as_not_json(page: Page, tmp_path: Path) -> None:
    summary = tmp_path / "static.json"
    summary.write_bytes(b"\x80 not text")
    at = page("views/whatif.py")
    at.text_area[0].set_value(str(summary)).run()
    no_exception(at)
    assert [e.value.startswith(escape_markdown(f"{summary}: not JSON ("))
            for e in at.error] == [True]


@pytest.mark.parametrize(("path", "then"), [
    ("views/overview.py", "this page refreshes on its own."),
    ("views/decisions.py", "this page refreshes on its own."),
    ("views/fleet.py", "reload this page once it has one."),
    ("views/models.py", "reload this page once it has one."),
    ("views/cost.py", "reload this page once it has one.")])
def test_a_store_without_ticks_shows_a_hint_that_says_whether_the_page_refreshes_on_its_own(
        path: str, then: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    Store.open(url, migrate=True)
    monkeypatch.setenv("HEADROOM_DB__URL", url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page(path).run()
    no_exception(at)
    assert [i.value for i in at.info] == [
        f"No reconcile tick in the store yet. Start `headroom demo` or `headroom serve`; {then}"]


def test_a_store_without_the_schema_says_how_to_create_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "blank.db").touch()  # an empty SQLite database
    monkeypatch.setenv("HEADROOM_DB__URL", f"sqlite:///{tmp_path / 'blank.db'}")
    at = AppTest.from_file(APP, default_timeout=60).run()
    no_exception(at)
    assert any("no Headroom schema yet" in i.value and "headroom db upgrade" in i.value
               for i in at.info)


def test_a_store_is_named_without_the_password_its_url_gives_as_a_query_parameter(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", f"{postgres_url}?password=QuerySecret77")
    at = AppTest.from_file(APP, default_timeout=60).run()  # a database without the schema
    no_exception(at)
    assert [i.value for i in at.info if "no Headroom schema yet" in i.value] == [
        f"The store at `{postgres_url}?password=***` has no Headroom schema yet. Run "
        "`headroom db upgrade` (or start `headroom demo`)."]


def test_a_mistyped_sqlite_path_is_named_and_no_empty_store_is_created(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "typo" / "headroom.db"
    monkeypatch.setenv("HEADROOM_DB__URL", f"sqlite:///{missing}")
    at = AppTest.from_file(APP, default_timeout=60).run()
    no_exception(at)
    assert [i.value for i in at.info] == [
        f"No store file at `{missing}` (from the store URL `sqlite:///{missing}`). Start "
        "`headroom demo`, or run `headroom db upgrade` and a reconcile (`headroom serve`), or "
        "open an existing store: `headroom dashboard --db FILE`, or `HEADROOM_DB__URL`."]
    assert not missing.parent.exists()


def test_a_store_url_of_a_scheme_headroom_cannot_open_is_an_error_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADROOM_DB__URL", "mysql://operator:secret@127.0.0.1:9/headroom")
    at = AppTest.from_file(APP, default_timeout=60).run()
    no_exception(at)
    assert [as_shown(e.value) for e in at.error] == [
        "Cannot open the store: environment variable HEADROOM_DB__URL: db.url: Value error, "
        "'mysql://operator:***@127.0.0.1:9/headroom': Headroom cannot open a mysql:// store; "
        "supported schemes: sqlite, sqlite+pysqlite, postgresql, postgres, postgresql+psycopg"]
    assert "operator:\\*\\*\\*@" in at.error[0].value  # the redacted password is not emphasis


class SilentServer:
    """A 127.0.0.1 socket that accepts connections and never answers (a hung database server);
    ``accepted_at``: when each connection came (``time.monotonic()``)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.accepted_at: list[float] = []
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.accepted_at.append(time.monotonic())
            self.held.append(client)

    def close(self) -> None:
        for client in [*self.held, self.sock]:
            client.close()


def test_a_hung_store_server_fails_the_page_within_the_connect_timeout_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    server = SilentServer()
    with closing(server):
        url = f"postgresql://operator@127.0.0.1:{server.port}/headroom"
        monkeypatch.setenv("HEADROOM_DB__URL", url)
        monkeypatch.setenv("HEADROOM_DB__CONNECT_TIMEOUT_S", "2")  # the default is 5
        at = AppTest.from_file(APP, default_timeout=60).run()
        failed_at = time.monotonic()
    no_exception(at)
    assert [as_shown(e.value) for e in at.error] == [
        f"Cannot open the store: cannot reach database {url}: no connection to the database "
        f"server at 127.0.0.1:{server.port} within 2 s (db.connect_timeout_s): it is down, or "
        "the network to it stalled"]
    assert len(server.accepted_at) == 1
    assert failed_at - server.accepted_at[0] < 3.5  # 2 s and the page's own work, not 5 s


def _usd(text: str) -> float:
    return float(text.replace("$", "").replace(",", ""))



@pytest.mark.parametrize("path", ["views/overview.py", "views/fleet.py", "views/models.py",
                                  "views/cost.py", "views/decisions.py"])
def test_a_store_that_fails_while_a_page_reads_it_is_one_error_line_not_a_traceback(
        path: str, seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(Path(seeded.url.removeprefix("sqlite:///")).read_bytes())
    with closing(sqlite3.connect(broken)) as connection:  # ticks stay: the first check passes
        connection.executescript("DROP TABLE observations; DROP TABLE plans; "
                                 "DROP TABLE forecasts;")
    monkeypatch.setenv("HEADROOM_DB__URL", f"sqlite:///{broken}")
    at = AppTest.from_file(APP, default_timeout=120).run()
    if path != "views/overview.py":
        at.switch_page(path).run()
    no_exception(at)
    assert [e.value for e in at.error if e.value.startswith("Cannot read the store")] != []
    assert any("no such table" in e.value and "run `headroom db upgrade`" in e.value
               for e in at.error)


def test_models_page_names_the_demand_hints_in_force_for_the_model(page: Page,
                                                                   seeded: Seeded) -> None:
    hints = SqlDemandHints(make_engine(seeded.url))
    added = hints.add_hint(DemandHint("llama-3-70b", 90.0, seeded.end_at - timedelta(hours=1),
                                      seeded.end_at + timedelta(hours=1), "keynote"),
                           seeded.end_at)
    try:
        at = page("views/models.py")
        at.selectbox[0].set_value("llama-3-70b").run()
        no_exception(at)
        shown = [c.value for c in at.caption if c.value.startswith("Demand hint")]
        assert shown == [f"Demand hint {added.hint_id}: at least 90 rps from "
                         f"{added.start_at:%Y-%m-%d %H:%M} until {added.end_at:%Y-%m-%d %H:%M} "
                         "UTC (keynote); the loop sizes from the forecast floored by it"]
        at.selectbox[0].set_value("bert-embed").run()
        assert not [c for c in at.caption if c.value.startswith("Demand hint")]
    finally:
        assert added.hint_id is not None
        hints.remove_hint(added.hint_id)

