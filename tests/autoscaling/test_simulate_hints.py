"""``headroom simulate --hints``: an announced campaign replayed as the live loop applies
``headroom hint add``; the fleet is ready when it starts, which the forecast alone cannot be;
a bad hints file is refused naming the file, line and column, before anything is written."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from simulate_support import (
    MODELS_YAML,
    ONE_MODEL_YAML,
    START,
    cli_app,
    rate,
    write_models,
    write_trace,
)
from typer.testing import CliRunner

LARGE = "chat/large"
CAMPAIGN_STEPS = range(24, 30)  # 4 h to 5 h: four times chat/large's demand
FACTOR = 4.0
FAST = ["--forecast-method", "persistence"]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app(), list(args))
    return result.exit_code, result.output


def _campaign_trace(path: Path) -> Path:
    return write_trace(path, tweak={(LARGE, s): f"{FACTOR * rate(LARGE, s)}"
                                    for s in CAMPAIGN_STEPS})


def _hints(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(["model,start,end,rate_rps,reason", *rows]) + "\n")
    return path


def _window() -> tuple[str, str]:
    start = START + timedelta(minutes=10 * CAMPAIGN_STEPS[0])
    end = START + timedelta(minutes=10 * (CAMPAIGN_STEPS[-1] + 1))
    return start.isoformat(), end.isoformat()


def _short_in_campaign(timeline: Path) -> int:
    start, end = (datetime.fromisoformat(t) for t in _window())
    with timeline.open() as handle:
        return sum(1 for r in csv.DictReader(handle)
                   if r["model"] == LARGE
                   and start <= datetime.fromisoformat(r["minute"]).replace(tzinfo=UTC) < end
                   and int(r["ready_replicas"]) * float(r["per_replica_rps"])
                   < float(r["demand_rps"]))


def test_an_announced_campaign_is_served_from_its_first_minute_only_with_the_hint(
        tmp_path: Path) -> None:
    trace = _campaign_trace(tmp_path / "trace.csv")
    models = write_models(tmp_path / "models.yaml")
    start, end = _window()
    level = max(FACTOR * rate(LARGE, s) for s in CAMPAIGN_STEPS)
    hints = _hints(tmp_path / "hints.csv", [f"{LARGE},{start},{end},{level},launch"])
    plain, hinted = tmp_path / "plain.csv", tmp_path / "hinted.csv"
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(plain), *FAST)
    assert code == 0, out
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(hinted), "--hints", str(hints), "--json", *FAST)
    assert code == 0, out
    assert _short_in_campaign(plain) > 0  # the forecast cannot know the campaign
    assert _short_in_campaign(hinted) == 0
    reasons = json.loads(out)["policies"]["predictive"]["demand_reasons"]
    assert any(r.endswith("+demand_hint") for r in reasons), reasons


def test_a_hint_holds_until_its_end_on_a_ten_minute_trace(tmp_path: Path) -> None:
    """The trace's 10-minute grid puts each forecast's origin at the next step: the minutes
    before it read its first step, which a hint ending at that origin floors until its end
    (before: the fleet fell back to the trace's level 8 minutes before the hint ended)."""
    trace = write_trace(tmp_path / "trace.csv", models=(LARGE,))
    models = write_models(tmp_path / "models.yaml", ONE_MODEL_YAML)
    start, end = START + timedelta(hours=2), START + timedelta(hours=3)
    hints = _hints(tmp_path / "hints.csv", [f"{LARGE},{start.isoformat()},{end.isoformat()},"
                                            "400,campaign"])
    timeline = tmp_path / "T.csv"
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(timeline), "--hints", str(hints), *FAST)
    assert code == 0, out
    with timeline.open() as handle:
        capacity_rps = {datetime.fromisoformat(r["minute"]).replace(tzinfo=UTC):
                        int(r["ready_replicas"]) * float(r["per_replica_rps"])
                        for r in csv.DictReader(handle)}
    held = [at for at, rps in capacity_rps.items() if start <= at < end and rps >= 400]
    assert len(held) == 60, sorted(set(capacity_rps) - set(held))[:3]
    assert capacity_rps[end + timedelta(minutes=10)] < 400  # and not beyond it


def test_hints_with_no_predictive_policy_warn_that_they_shape_nothing_and_are_not_tagged(
        tmp_path: Path) -> None:
    trace = _campaign_trace(tmp_path / "trace.csv")
    models = write_models(tmp_path / "models.yaml")
    start, end = _window()
    hints = _hints(tmp_path / "hints.csv", [f"{LARGE},{start},{end},900,launch"])
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "T.csv"), "--hints", str(hints), "--policy", "reactive",
                     "--policy", "static", "--json", *FAST)
    assert code == 0, out
    assert (f"warning: --hints {hints}: demand hints only shape the predictive policy; "
            "reactive, static never read them") in " ".join(out.split())
    document = json.loads(out[out.index("{"):])
    reasons = [r for p in document["policies"].values() for r in p["demand_reasons"]]
    assert reasons and not any(r.endswith("+demand_hint") for r in reasons), reasons
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "U.csv"), "--hints", str(hints), "--policy", "reactive",
                     "--policy", "predictive", *FAST)
    assert code == 0, out
    assert "warning:" not in out


@pytest.mark.parametrize(("text", "message"), [
    ("model,start,rate_rps\n", "missing column(s) end"),
    (f"model,start,end,rate_rps\n{LARGE},2025-01-01T04:00Z,2025-01-01T05:00Z,10\n"
     "chat/other,2025-01-01T04:00Z,2025-01-01T05:00Z,10\n",
     "line 3 column model: 'chat/other' is not in the models file (chat/large, chat/small)"),
    (f"model,start,end,rate_rps\n{LARGE},soon,2025-01-01T05:00Z,10\n",
     "line 2 column start: 'soon' is not an ISO-8601 time"),
    (f"model,start,end,rate_rps\n{LARGE},2025-01-01T04:00Z,9999-12-31T23:00:00-05:00,10\n",
     "line 2 column end: '9999-12-31T23:00:00-05:00' is out of range in UTC (years 1 to 9999)"),
    (f"model,start,end,rate_rps\n{LARGE},2025-01-01T04:00Z,2025-01-01T05:00Z,-3\n",
     "line 2 column rate_rps: -3 is not a rate in (0, 1e+07] rps"),
    (f"model,start,end,rate_rps\n{LARGE},2025-01-01T04:00Z,2025-01-01T05:00Z,0\n",
     "line 2 column rate_rps: 0 is not a rate in (0, 1e+07] rps"),
    (f"model,start,end,rate_rps\n{LARGE},2025-01-01T05:00Z,2025-01-01T04:00Z,10\n",
     "line 2 column end: 2025-01-01T04:00Z is not after start 2025-01-01T05:00Z"),
    (f"model,start,end,rate_rps\n{LARGE},2025-01-01T05:00Z,2025-01-01T06:00+01:00,10\n",
     "line 2 column end: 2025-01-01T06:00+01:00 is not after start 2025-01-01T05:00Z"),
], ids=["a missing column", "an unknown model", "not a time", "an end past year 9999 in UTC",
        "a negative rate", "a rate of zero",
        "an end before the start", "an end at the start in another zone"])
def test_a_bad_hints_file_is_refused_naming_file_line_and_column(
        tmp_path: Path, text: str, message: str) -> None:
    hints = tmp_path / "hints.csv"
    hints.write_text(text)
    out_path = tmp_path / "T.csv"
    code, out = _run("--trace", str(write_trace(tmp_path / "trace.csv", steps=6)), "--models",
                     str(write_models(tmp_path / "models.yaml")), "--timeline-out",
                     str(out_path), "--hints", str(hints), *FAST)
    assert code == 2
    assert f"--hints {hints}" in " ".join(out.split()) and message in " ".join(out.split())
    assert not out_path.exists()


def test_every_bad_line_of_a_hints_file_is_named_in_one_run(tmp_path: Path) -> None:
    hints = _hints(tmp_path / "hints.csv", [
        f"{LARGE},2025-01-01T04:00Z,2025-01-01T05:00Z,10,fine",
        "chat/nope,2025-01-01T04:00Z,2025-01-01T05:00Z,10,",
        f"{LARGE},soon,2025-01-01T05:00Z,10,",
        f"{LARGE},2025-01-01T04:00Z,2025-01-01T05:00Z,-3,"])
    out_path = tmp_path / "T.csv"
    code, out = _run("--trace", str(write_trace(tmp_path / "trace.csv", steps=6)), "--models",
                     str(write_models(tmp_path / "models.yaml")), "--timeline-out",
                     str(out_path), "--hints", str(hints), *FAST)
    assert code == 2
    lines = [" ".join(line.split()) for line in " ".join(out.split()).split("error: ")[1:]]
    assert [line.split(" column ")[0] for line in lines] == [
        f"--hints {hints} line {n}" for n in (3, 4, 5)]
    assert "column model: 'chat/nope' is not in the models file" in lines[0]
    assert "column start: 'soon' is not an ISO-8601 time" in lines[1]
    assert "column rate_rps: -3 is not a rate" in lines[2]
    assert not out_path.exists()


def test_a_hints_file_that_is_not_utf8_is_refused_naming_the_file(tmp_path: Path) -> None:
    hints = tmp_path / "hints.csv"
    hints.write_bytes(f"model,start,end,rate_rps,reason\n{LARGE},2025-01-01T04:00Z,"
                      "2025-01-01T05:00Z,10,lancement pr\xe9vu\n".encode("latin-1"))
    out_path = tmp_path / "T.csv"
    code, out = _run("--trace", str(write_trace(tmp_path / "trace.csv", steps=6)), "--models",
                     str(write_models(tmp_path / "models.yaml")), "--timeline-out",
                     str(out_path), "--hints", str(hints), *FAST)
    assert code == 2
    assert f"--hints {hints}: not UTF-8 text (byte " in " ".join(out.split())
    assert not out_path.exists()


def test_a_hints_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    start, end = _window()
    plain = _hints(tmp_path / "plain.csv", [f"{LARGE},{start},{end},500,launch"])
    marked = tmp_path / "marked.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    trace, models = _campaign_trace(tmp_path / "trace.csv"), write_models(tmp_path / "models.yaml")
    for hints in (plain, marked):
        code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                         str(tmp_path / f"T.{hints.stem}.csv"), "--hints", str(hints), *FAST)
        assert code == 0, out
    assert (tmp_path / "T.marked.csv").read_text() == (tmp_path / "T.plain.csv").read_text()


def test_a_hint_beyond_the_pools_capacity_is_reported_capped_naming_the_limit(
        tmp_path: Path) -> None:
    trace = _campaign_trace(tmp_path / "trace.csv")
    models = write_models(tmp_path / "models.yaml", MODELS_YAML + "  max_nodes: 40\n")
    start, end = _window()
    hints = _hints(tmp_path / "hints.csv", [f"{LARGE},{start},{end},5000,launch"])
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "T.csv"), "--hints", str(hints), "--json", *FAST)
    assert code == 0, out
    capped = json.loads(out[out.index("{"):])["policies"]["predictive"]["hints_capped"]
    assert list(capped) == [LARGE]
    assert capped[LARGE]["ticks"] > 0 and capped[LARGE]["limit"] == "pool_max_nodes:a100-80gb"
    # 40 nodes of 8 GPUs, chat/small keeps some: fewer than 320 whole-GPU replicas of 2 rps
    assert capped[LARGE]["replicas"] < 320 and capped[LARGE]["announced_rps"] == 5000
    assert capped[LARGE]["served_rps"] < 5000 * 0.2
    assert (f"predictive: the demand hint on {LARGE} was capped in {capped[LARGE]['ticks']} "
            "tick(s)") in " ".join(out.split())


def test_a_hint_the_fleet_can_hold_is_not_reported_capped(tmp_path: Path) -> None:
    trace = _campaign_trace(tmp_path / "trace.csv")
    models = write_models(tmp_path / "models.yaml", MODELS_YAML + "  max_nodes: 40\n")
    start, end = _window()
    hints = _hints(tmp_path / "hints.csv", [f"{LARGE},{start},{end},250,launch"])
    code, out = _run("--trace", str(trace), "--models", str(models), "--timeline-out",
                     str(tmp_path / "T.csv"), "--hints", str(hints), "--json", *FAST)
    assert code == 0, out
    assert "hints_capped" not in json.loads(out[out.index("{"):])["policies"]["predictive"]
    assert "capped" not in out


def test_a_hint_outside_the_traces_minutes_is_a_warning_naming_it_and_the_traces_span(
        tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "trace.csv", steps=6)  # 2025-01-01 00:00 to 01:00
    hints = _hints(tmp_path / "hints.csv", [
        f"{LARGE},2026-01-01T00:20:00Z,2026-01-01T00:40:00Z,900,wrong year",
        f"{LARGE},2025-01-01T01:05:00Z,2025-01-01T02:00:00Z,900,its lead meets the end"])
    code, out = _run("--trace", str(trace), "--models", str(write_models(
        tmp_path / "models.yaml")), "--timeline-out", str(tmp_path / "T.csv"),
        "--hints", str(hints), *FAST)
    assert code == 0, out
    said = " ".join(out.split())
    assert (f"warning: --hints {hints}: the hint on {LARGE} from 2026-01-01T00:20:00Z until "
            "2026-01-01T00:40:00Z is outside the trace (2025-01-01T00:00:00Z to "
            "2025-01-01T01:00:00Z) and shapes nothing") in said
    assert said.count("is outside the trace") == 1
