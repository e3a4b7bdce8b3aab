"""`headroom hint add | list | remove` on a store file: a hint announced, listed and withdrawn;
bad input is one line naming the option, model or store, with exit code 2, and writes nothing."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from clihelpers import WARM_HEADROOM, _env, simulated_store

from controlplane.adapters.clock import WallClock
from controlplane.domain.hints import DemandHint
from controlplane.domain.profile import ProfileCorrection
from controlplane.domain.tick import TickReport
from controlplane.domain.timestamps import utc_text
from controlplane.runtime import SimRuntime
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.store import Store, downgrade
from controlplane.store.hints import SqlDemandHints
from controlplane.store.pauses import SqlModelPauses

CHAT = "llama-3-8b-chat"


def _hint(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WARM_HEADROOM, "hint", *args, "--db", str(db)], env=_env(COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    Store.open(f"sqlite:///{path}", migrate=True).upsert_models(DEMO_MODELS)
    return path


def _later(hours: float) -> str:
    return (WallClock().now() + timedelta(hours=hours)).isoformat()


def test_a_hint_is_announced_listed_and_withdrawn(db: Path) -> None:
    added = _hint(db, "add", CHAT, "--rps", "600", "--start", _later(1), "--end", _later(2),
                  "--reason", "launch [tenant-a]")
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"hint 1: {CHAT} >= 600 rps from ")
    assert added.stdout.rstrip().endswith("UTC (launch [tenant-a])")
    listed = json.loads(_hint(db, "list", "--json").stdout)
    assert [(h["id"], h["model"], h["rate_rps"], h["reason"]) for h in listed] == [
        (1, CHAT, 600.0, "launch [tenant-a]")]
    table = _hint(db, "list").stdout
    assert CHAT in table and "launch [tenant-a]" in table
    removed = _hint(db, "remove", "1")
    assert removed.returncode == 0 and removed.stdout.startswith("removed hint 1:")
    assert json.loads(_hint(db, "list", "--all", "--json").stdout) == []


def test_on_a_narrow_terminal_hint_list_folds_a_long_model_name_whole(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = Store.open(f"sqlite:///{path}", migrate=True)
    long_name = "org-team/" + "very-long-model-name-" * 4 + "v2"
    store.upsert_models([replace(DEMO_MODELS[0], name=long_name)])
    now = WallClock().now()
    SqlDemandHints(store.engine).add_hint(DemandHint(long_name, 5.0, now,
                                                     now + timedelta(hours=1)), now)
    table = subprocess.run([*WARM_HEADROOM, "hint", "list", "--db", str(path)],
                           env=_env(COLUMNS="80"), capture_output=True, text=True, timeout=120)
    rows = [line.split("│") for line in table.stdout.splitlines() if line.startswith("│")]
    assert "".join(r[2].strip() for r in rows) == long_name  # before: "org-team/very-lon…"


def test_a_hint_starts_now_unless_told_and_ended_ones_show_only_with_all(db: Path) -> None:
    hints = SqlDemandHints(Store.open(f"sqlite:///{db}").engine)
    assert _hint(db, "add", CHAT, "--rps", "50", "--end", _later(1)).returncode == 0
    (hint,) = hints.hints()
    assert abs((hint.start_at - WallClock().now()).total_seconds()) < 60
    hints.remove_hint(1)
    now = WallClock().now()
    hints.add_hint(DemandHint(CHAT, 50.0, now - timedelta(hours=2), now - timedelta(hours=1)),
                   now)
    assert "no demand hints in force or ahead" in _hint(db, "list").stdout
    assert len(json.loads(_hint(db, "list", "--all", "--json").stdout)) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["add", "nope", "--rps", "5", "--end", "2099-01-01T00:00:00Z"],
     "model 'nope' is not in the store's models table (known: bert-embed, llama-3-70b, "),
    (["add", CHAT, "--rps", "5", "--end", "2020-01-01T00:00:00Z"],
     "--end 2020-01-01T00:00:00Z: already past"),
    (["add", CHAT, "--rps", "5", "--end", "tomorrow"], "--end 'tomorrow': not an ISO-8601 time"),
    (["add", CHAT, "--rps", "5", "--end", "9999-12-31T23:00:00-05:00"],
     "--end '9999-12-31T23:00:00-05:00': out of range in UTC (years 1 to 9999)"),
    (["add", CHAT, "--rps", "5", "--start", "2099-01-02T00:00:00Z", "--end",
      "2099-01-01T00:00:00Z"],
     "--end 2099-01-01T00:00:00Z: not after --start 2099-01-02T00:00:00Z"),
    (["add", CHAT, "--rps", "5", "--start", "0001-01-01T00:00Z", "--end",
      "2099-01-01T00:00:00Z"],  # before: stored, and listed from "1-01-01 00:00"
     "--start 0001-01-01T00:00Z: before 1970-01-01T00:00:00Z (leave --start out for a hint "
     "in force from now)"),
    (["add", CHAT, "--rps", "5", "--end", "2099-01-01T00:00:00Z", "--reason", "x" * 501],
     "--reason: 501 characters, at most 500"),
    (["remove", "7"], "no demand hint with id 7 (see `headroom hint list --all`)"),
    (["add", "chat\u202e", "--rps", "5", "--end", "2099-01-01T00:00:00Z"],
     "error: the model name holds the control character U+202E at 4 (control and "
     "bidirectional characters are refused)"),
], ids=["unknown model", "a past end", "not a time", "an end past year 9999 in UTC",
        "end before start", "a start before 1970", "a reason too long",
        "an unknown id", "a model name with a bidirectional control"])
def test_bad_input_is_one_line_naming_it_and_writes_nothing(db: Path, args: list[str],
                                                            message: str) -> None:
    run = _hint(db, *args)
    assert run.returncode == 2
    assert message in run.stderr and run.stderr.count("\n") == 1
    assert SqlDemandHints(Store.open(f"sqlite:///{db}").engine).hints() == ()


def test_a_window_that_ends_before_it_starts_names_the_options_and_times_as_typed(
        db: Path) -> None:
    run = _hint(db, "add", CHAT, "--rps", "5", "--start", "2099-01-02T09:00+09:00", "--end",
                "2099-01-01T23:00")
    assert (run.returncode, run.stderr) == (  # before: "--start/--end: demand hint for ...:
        # end_at 2099-01-01T23:00:00Z is not after start_at 2099-01-02T00:00:00Z"
        2, "error: --end 2099-01-01T23:00: not after --start 2099-01-02T09:00+09:00\n")


def test_a_rate_of_zero_is_refused_naming_rps_and_writes_nothing(db: Path) -> None:
    run = _hint(db, "add", CHAT, "--rps", "0", "--end", "2099-01-01T00:00:00Z")
    assert run.returncode == 2  # before: "hint 1: ... >= 0 rps", a hint that floors nothing
    assert ("Invalid value for '--rps': 0.0 is not in the range 0.0<x<=10000000.0"
            in " ".join(run.stderr.replace("│", " ").split()))
    assert SqlDemandHints(Store.open(f"sqlite:///{db}").engine).hints() == ()


def test_a_hint_for_a_model_named_only_whitespace_blames_the_model_not_the_window(
        db: Path) -> None:
    Store.open(f"sqlite:///{db}").upsert_models([replace(DEMO_MODELS[0], name="   ")])
    run = _hint(db, "add", "   ", "--rps", "5", "--end", "2099-01-01T00:00:00Z")
    assert (run.returncode, run.stderr) == (  # before: "--start/--end: demand hint: ..."
        2, "error: model '   ' is empty or only whitespace\n")

def test_a_store_without_the_hints_table_or_no_store_at_all_says_what_to_do(
        db: Path, tmp_path: Path) -> None:
    downgrade(Store.open(f"sqlite:///{db}").engine, "0006")
    old = _hint(db, "list")
    assert old.returncode == 2
    assert re.search(r"no such table: demand_hints: the store is at revision 0006, behind by "
                     r"\d+ migrations; `headroom db upgrade` applies them\n$", old.stderr)
    missing = _hint(tmp_path / "absent.db", "list")
    assert missing.returncode == 2 and "no such database file" in missing.stderr
    assert not (tmp_path / "absent.db").exists()


def test_status_shows_the_hints_not_ended_at_the_last_tick(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    now = WallClock().now()
    settings = load_settings(db={"url": url}, sim={"history_s": 3600})
    runtime = SimRuntime.open(settings, Store.open(url, migrate=True), now)
    runtime.advance(60)
    hints = SqlDemandHints(runtime.store.engine)
    hints.add_hint(DemandHint(CHAT, 900.0, now - timedelta(hours=3), now - timedelta(hours=2),
                              "last week's launch"), now)
    ahead = hints.add_hint(DemandHint(CHAT, 600.0, now + timedelta(hours=1),
                                      now + timedelta(hours=2), "launch"), now)
    run = subprocess.run([*WARM_HEADROOM, "status", "--json", "--db", str(tmp_path / "store.db")],
                         env=_env(), capture_output=True, text=True, timeout=120)
    assert json.loads(run.stdout)["hints"] == [{
        "id": ahead.hint_id, "model": CHAT, "model_listed": True, "rate_rps": 600.0,
        "start_at": ahead.start_at.isoformat().replace("+00:00", "Z"),
        "end_at": ahead.end_at.isoformat().replace("+00:00", "Z"), "reason": "launch"}]
    text = subprocess.run([*WARM_HEADROOM, "status", "--db", str(tmp_path / "store.db")],
                          env=_env(COLUMNS="200"), capture_output=True, text=True, timeout=120)
    assert "Demand hints" in text.stdout and "launch" in text.stdout
    assert "last week's launch" not in text.stdout


def test_status_before_the_first_tick_shows_the_hints_already_stored(tmp_path: Path) -> None:
    """An operator announces a launch before the loop starts: status says there is no tick yet
    and still lists the hint the first tick will read."""
    store_file = tmp_path / "store.db"
    Store.open(f"sqlite:///{store_file}", migrate=True).engine.dispose()
    now = WallClock().now()
    ahead = SqlDemandHints(Store.open(f"sqlite:///{store_file}").engine).add_hint(
        DemandHint(CHAT, 600.0, now + timedelta(hours=1), now + timedelta(hours=2), "launch"),
        now)
    run = subprocess.run([*WARM_HEADROOM, "status", "--json", "--db", str(store_file)],
                         env=_env(), capture_output=True, text=True, timeout=120)
    doc = json.loads(run.stdout)
    assert run.returncode == 1 and [p["code"] for p in doc["problems"]] == ["no_tick"]
    assert [h["id"] for h in doc["hints"]] == [ahead.hint_id]
    text = subprocess.run([*WARM_HEADROOM, "status", "--db", str(store_file)],
                          env=_env(COLUMNS="200"), capture_output=True, text=True, timeout=120)
    assert "Demand hints" in text.stdout and "launch" in text.stdout


def _config(tmp_path: Path, max_nodes: int) -> Path:
    """serve's settings with one A100 pool of ``max_nodes`` nodes of 8 GPUs (the demo's chat
    model runs 2 replicas of 40 rps to a GPU, sized at the default target utilization 0.8)."""
    path = tmp_path / "headroom.yaml"
    path.write_text("pools:\n"
                    f"  - {{name: a100-80gb, product: A100-80GB, gpus_per_node: 8, "
                    f"max_nodes: {max_nodes}, price_per_gpu_hour: 5.12}}\n")
    return path


def test_a_hint_over_what_the_configured_pool_can_ever_hold_is_stored_with_one_warning_line(
        db: Path, tmp_path: Path) -> None:
    added = _hint(db, "add", CHAT, "--rps", "2000", "--end", _later(2), "--reason", "launch",
                  "--config", str(_config(tmp_path, max_nodes=2)))
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"hint 1: {CHAT} >= 2000 rps from ")
    assert added.stderr == (
        f"warning: hint 1: {CHAT} at 2000 rps needs 63 replicas on 32 A100-80GB GPUs, but "
        "pool_max_nodes:a100-80gb holds at most 32 replicas on 16 GPUs (1024 rps at 40 rps per "
        "replica: the offline profile, no tick has recorded a correction of it); the hint is "
        "stored and the loop will scale the model as far as that allows\n")
    stored = SqlDemandHints(Store.open(f"sqlite:///{db}").engine).hints()
    assert [(h.model, h.rate_rps) for h in stored] == [(CHAT, 2000.0)]


def test_a_hint_the_configured_pool_holds_or_one_added_without_config_says_nothing_more(
        db: Path, tmp_path: Path) -> None:
    held = _hint(db, "add", CHAT, "--rps", "1000", "--end", _later(2),
                 "--config", str(_config(tmp_path, max_nodes=2)))
    assert (held.returncode, held.stderr) == (0, "")  # 1000 / 0.8 / 40 = 31.25: 32 replicas
    # without --config the CLI knows no fleet's pools (its defaults are nobody's): unchecked
    unchecked = _hint(db, "add", CHAT, "--rps", "9999999", "--end", _later(2))
    assert (unchecked.returncode, unchecked.stderr) == (0, "")
    assert len(SqlDemandHints(Store.open(f"sqlite:///{db}").engine).hints()) == 2


def test_a_hint_is_checked_on_the_profile_the_last_tick_corrected_as_the_loop_sizes_with(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    now = WallClock().now()
    runtime = SimRuntime.open(load_settings(db={"url": url}, sim={"history_s": 3600}),
                              Store.open(url, migrate=True), now)
    reports: list[TickReport] = []
    runtime.on_tick = lambda report, _saved: reports.append(report)
    runtime.advance(30)
    halved = ProfileCorrection(CHAT, 40.0, 20.0, 0.5, 31, "over_slo: 31 of 120 samples")
    runtime.store.save_tick(replace(reports[-1], profiles=(halved,)))  # the newest tick's
    config = _config(tmp_path, max_nodes=2)
    # offline, 1000 rps fit: 1000 / 0.8 / 40 = 31.25, 32 replicas (before: no warning); the
    # loop sizes 20 rps per replica: 63 needed
    added = _hint(tmp_path / "store.db", "add", CHAT, "--rps", "1000", "--end", _later(2),
                  "--config", str(config))
    assert added.returncode == 0, added.stderr
    assert added.stderr == (
        f"warning: hint 1: {CHAT} at 1000 rps needs 63 replicas on 32 A100-80GB GPUs, but "
        "pool_max_nodes:a100-80gb holds at most 32 replicas on 16 GPUs (512 rps at 20 rps per "
        "replica: the profile the last tick corrected online, 0.5x the offline 40); the hint is "
        "stored and the loop will scale the model as far as that allows\n")
    off = tmp_path / "off.yaml"
    off.write_text(config.read_text() + "autoscaling: {profile_correction: {enabled: false}}\n")
    offline = _hint(tmp_path / "store.db", "add", CHAT, "--rps", "1000", "--end", _later(3),
                    "--config", str(off))
    assert (offline.returncode, offline.stderr) == (0, "")  # the loop would size it offline


def test_a_hint_on_a_paused_model_is_stored_with_a_warning_that_the_pause_holds(
        db: Path) -> None:
    now = WallClock().now()
    assert SqlModelPauses(Store.open(f"sqlite:///{db}").engine).pause(CHAT, 3, now, "ops")
    added = _hint(db, "add", CHAT, "--rps", "600", "--end", _later(2))  # no --config: said
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"hint 1: {CHAT} >= 600 rps from ")
    assert added.stderr == (
        f"warning: hint 1: {CHAT} is paused since {now:%Y-%m-%dT%H:%M:%SZ} by ops, held at 3 "
        f"replica(s): the pause holds until `headroom models resume {CHAT}`; the loop sizes "
        "the model for the hint only then\n")
    assert len(SqlDemandHints(Store.open(f"sqlite:///{db}").engine).hints()) == 1


def test_status_says_a_hint_the_pool_cannot_hold_was_capped_served_of_announced(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    now = WallClock().now()
    settings = load_settings(db={"url": url}, sim={"history_s": 3600})
    store = Store.open(url, migrate=True)
    SqlDemandHints(store.engine).add_hint(DemandHint(CHAT, 20000.0, now, now + timedelta(hours=1),
                                                     "launch"), now)
    SimRuntime.open(settings, store, now).advance(60)
    run = subprocess.run([*WARM_HEADROOM, "status", "--json", "--db", str(tmp_path / "store.db")],
                         env=_env(), capture_output=True, text=True, timeout=120)
    doc = json.loads(run.stdout)
    capped = [n for n in doc["last_tick"]["notes"] if n.startswith(f"demand hint on {CHAT}:")]
    assert len(capped) == 1
    assert capped[0].startswith(f"demand hint on {CHAT}: 20000 rps announced, ")
    assert capped[0].endswith(" rps: capped by pool_max_nodes:a100-80gb")
    assert [h["rate_rps"] for h in doc["hints"]] == [20000.0]
    text = subprocess.run([*WARM_HEADROOM, "status", "--db", str(tmp_path / "store.db")],
                          env=_env(COLUMNS="250"), capture_output=True, text=True, timeout=120)
    assert capped[0] in text.stdout


def test_a_rate_of_a_million_or_more_reads_in_digits_not_an_exponent(db: Path) -> None:
    added = _hint(db, "add", CHAT, "--rps", "1234567", "--end", _later(2))
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith(f"hint 1: {CHAT} >= 1234567 rps from ")
    listed = _hint(db, "list")
    assert "1234567" in listed.stdout and "e+06" not in listed.stdout


def test_on_a_simulated_store_ahead_of_the_wall_clock_an_end_before_its_clock_is_past(
        tmp_path: Path) -> None:
    """``demo --start`` days ahead: an end 12 hours after the wall clock's now was accepted and
    listed, yet the loop, days later by its own clock, never applied it (and status left it
    out). Now the store's simulated clock judges, and the error names it."""
    db, tick_at = simulated_store(tmp_path, WallClock().now() + timedelta(days=5))
    refused = _hint(db, "add", CHAT, "--rps", "600", "--end", _later(12))
    assert refused.returncode == 2
    assert (f"already past (now {utc_text(tick_at)} by the store's simulated clock)"
            in refused.stderr)
    assert json.loads(_hint(db, "list", "--json").stdout) == []
    end = utc_text(tick_at + timedelta(hours=1))
    added = _hint(db, "add", CHAT, "--rps", "600", "--end", end)
    assert added.returncode == 0, added.stderr
    assert [h["end_at"] for h in json.loads(_hint(db, "list", "--json").stdout)] == [end]
    listed = _hint(db, "list").stdout
    assert f"in force or ahead at {utc_text(tick_at)} by the store's simulated clock" in listed
    status = subprocess.run([*WARM_HEADROOM, "status", "--json", "--db", str(db)], env=_env(),
                            capture_output=True, text=True, timeout=120)
    assert [h["end_at"] for h in json.loads(status.stdout)["hints"]] == [end]


def test_on_a_simulated_store_behind_the_wall_clock_a_hint_ahead_of_its_clock_is_taken(
        tmp_path: Path) -> None:
    """A demo resumed two days after it stopped goes on from its last tick: a hint ending an
    hour after that tick is in force for it, though the wall clock has passed it (before:
    refused as already past by the wall clock)."""
    db, tick_at = simulated_store(tmp_path, WallClock().now() - timedelta(days=2))
    end = utc_text(tick_at + timedelta(hours=1))
    added = _hint(db, "add", CHAT, "--rps", "600", "--end", end)
    assert added.returncode == 0, added.stderr
    assert [h["end_at"] for h in json.loads(_hint(db, "list", "--json").stdout)] == [end]


def test_on_a_real_fleets_store_the_wall_clock_judges_and_the_error_says_so(db: Path) -> None:
    refused = _hint(db, "add", CHAT, "--rps", "600", "--end", _later(-1))
    assert refused.returncode == 2 and "by the wall clock)" in refused.stderr
