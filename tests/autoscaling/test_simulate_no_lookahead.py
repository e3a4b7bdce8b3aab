"""``headroom simulate`` never sees the future, checked through the CLI as the benchmark runs it:
changing the trace at or after minute T (x20, then x3 with zero windows), or cutting the file off
there, leaves every timeline row before T exactly as it was, column for column, for the
predictive policy (forecasts refreshed every 5 minutes from the data before now, the tail
calibrated from errors scored once their target has passed, with and without profile correction)
and the reactive one, on traces of 1- and 10-minute steps. Static provisions for the peak of the
*whole* trace by design, so a higher future peak changes its past: it is the control that shows
the comparison catches a look ahead."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from simulate_support import START, cli_app, write_models, write_trace
from typer.testing import CliRunner

from controlplane.cli.simulate import ORACLE_LABEL
from controlplane.simulation.config import load_models_file
from controlplane.simulation.engine import ORACLE, ForecastCache, SimOptions, run_policy
from controlplane.simulation.replay import DemandReplay
from controlplane.simulation.runner import PolicyKnobs, build_policy
from controlplane.simulation.trace import load_trace

#: trace minutes by step: the tail is calibrated once 48 errors are scored, from minute ~250 at
#: 1-minute steps, ~320 at 10-minute steps (two forecasts a step, after 7 steps of volatility)
MINUTES = {1: 330, 10: 370}
#: 1-minute steps: a forecast refresh minute (1, 6, 11, ...) and a minute between two
CUT_AT_REFRESH = 301
CUT_BETWEEN_REFRESHES = 287
CUT_AT_A_STEP = 340  # 10-minute steps: a change starts with a step
MODELS = ("chat/large", "chat/small")
Future = Callable[[int], float | None]  # minute -> the factor on its rate (None: cut off)


def _rate_rps(model: str, minute: int) -> float:
    """A slow wave with a burst every 45 minutes and a few per cent of per-minute jitter."""
    base = 60.0 if model == "chat/large" else 600.0
    wave = 1 + 0.4 * math.sin(2 * math.pi * minute / 360)
    burst = 1.6 if minute % 45 in range(20, 25) else 1.0
    jitter = 1 + 0.03 * ((minute * 37 + len(model)) % 7 - 3)
    return round(base * wave * burst * jitter, 3)


def _scaled_with_zero_windows(cut: int) -> Future:
    """From ``cut`` on: x20 for 3 minutes (so that a peek of a second changes a decision),
    then x3 with a 7-minute zero window every 21 minutes."""
    def factor(minute: int) -> float:
        if minute < cut:
            return 1.0
        if minute < cut + 3:
            return 20.0
        return 0.0 if (minute - cut) // 7 % 3 == 1 else 3.0

    return factor


def _cut_off(cut: int) -> Future:
    return lambda minute: 1.0 if minute < cut else None


FUTURES = {"x3 and zeros": _scaled_with_zero_windows, "cut off": _cut_off}


def _write_trace(path: Path, step_min: int, future: Future | None) -> Path:
    lines = ["ts,model,rate_rps"]
    for minute in range(0, MINUTES[step_min], step_min):
        at = (START + timedelta(minutes=minute)).strftime("%Y-%m-%d %H:%M:%S")
        factor = 1.0 if future is None else future(minute)
        if factor is not None:
            lines += [f"{at},{model},{_rate_rps(model, minute) * factor:.3f}" for model in MODELS]
    path.write_text("\n".join(lines) + "\n")
    return path


Timelines = dict[str, list[dict[str, str]]]  # policy -> rows


def _timelines(folder: Path, step_min: int, future: Future | None, *extra: str) -> Timelines:
    """Simulate predictive, reactive and static on the trace; each policy's timeline rows."""
    trace = _write_trace(folder / "trace.csv", step_min, future)
    models = write_models(folder / "models.yaml")
    result = CliRunner().invoke(cli_app(), [
        "--trace", str(trace), "--models", str(models), "--policy", "predictive", "--policy",
        "reactive", "--policy", "static", "--timeline-out", str(folder / "T.csv"), "--json",
        "--forecast-method", "persistence", *extra])
    assert result.exit_code == 0, result.output
    with_rows = {}
    for policy, path in json.loads(result.output)["timelines"].items():
        with Path(path).open() as handle:
            with_rows[policy] = list(csv.DictReader(handle))
    return with_rows


def _before(rows: list[dict[str, str]], minute: int) -> list[dict[str, str]]:
    first = (START + timedelta(minutes=minute)).strftime("%Y-%m-%d %H:%M:%S")
    return [row for row in rows if row["minute"] < first]


#: (trace step in minutes, future ("" as recorded), cut, extra options) -> timelines
Simulated = Callable[[int, str, int, tuple[str, ...]], Timelines]
ONE_TICK_A_MINUTE = ("--tick-s", "60")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Simulated:
    """Timelines, each simulated once per module."""
    made: dict[tuple[int, str, int, tuple[str, ...]], Timelines] = {}

    def run(step_min: int, future: str, cut: int, extra: tuple[str, ...]) -> Timelines:
        key = (step_min, future, cut, extra)
        if key not in made:
            made[key] = _timelines(tmp_path_factory.mktemp("simulate"), step_min,
                                   FUTURES[future](cut) if future else None, *extra)
        return made[key]

    return run


@pytest.mark.parametrize(("step_min", "future", "cut", "extra"), [
    (1, "x3 and zeros", CUT_AT_REFRESH, ()),
    (1, "cut off", CUT_AT_REFRESH, ()),
    (1, "x3 and zeros", CUT_BETWEEN_REFRESHES, ("--profile-correction",)),
    (10, "x3 and zeros", CUT_AT_A_STEP, ()),
], ids=["x3 and zeros from a refresh minute", "the file cut off",
        "x3 and zeros between refreshes, profile correction", "10-minute steps"])
def test_a_changed_future_leaves_every_timeline_row_before_it_as_it_was(
        simulated: Simulated, step_min: int, future: str, cut: int,
        extra: tuple[str, ...]) -> None:
    """With ticks every 30 s, the second tick of minute T observes [T:00, T:30), so row T may
    differ; no row before it may."""
    _assert_same_past(simulated(step_min, "", 0, extra), simulated(step_min, future, cut, extra),
                      cut, cut, MINUTES[step_min])


@pytest.mark.parametrize(("step_min", "cut"), [(1, CUT_AT_REFRESH), (10, CUT_AT_A_STEP)],
                         ids=["1-minute steps, from a refresh minute", "10-minute steps"])
def test_with_one_tick_a_minute_the_row_of_the_changed_minute_is_unchanged_too(
        simulated: Simulated, step_min: int, cut: int) -> None:
    """With one tick a minute, at its start, minute T's row comes of a decision made before
    any of minute T was observed, so only its demand may change: a peek of even one second
    (an observation, a forecast or an error scored from the minute under way) shows here."""
    _assert_same_past(simulated(step_min, "", 0, ONE_TICK_A_MINUTE),
                      simulated(step_min, "x3 and zeros", cut, ONE_TICK_A_MINUTE), cut, cut + 1,
                      MINUTES[step_min])


@pytest.mark.parametrize(("step_min", "cut"), [(1, CUT_AT_REFRESH), (10, CUT_AT_A_STEP)],
                         ids=["1-minute steps, from a refresh minute", "10-minute steps"])
def test_every_forecast_made_up_to_the_change_and_its_calibrated_tail_is_unchanged(
        tmp_path: Path, step_min: int, cut: int) -> None:
    """A forecast made at minute m reads only the minutes before m, and its tail only the
    errors of forecasts whose target has passed, so the forecasts made up to and including
    minute T are the same, calibrated ratios included: the timelines alone would miss a peek
    that moves the tail too little to change a whole replica."""
    config = load_models_file(write_models(tmp_path / "models.yaml"))
    options = SimOptions(forecast_method="persistence", tick_s=60)
    made = []
    for future in (None, _scaled_with_zero_windows(cut)):
        trace = load_trace(_write_trace(tmp_path / "trace.csv", step_min, future))
        cache = ForecastCache()  # the replay's forecasts by (model, minute made)
        policy = build_policy("reactive", trace, config, PolicyKnobs(), options)
        run_policy(DemandReplay(trace, options.observe_window_s), config, policy, options,
                   cache=cache)
        made.append([cache.get(model, minute) for minute in range(cut + 1) for model in MODELS])
    assert made[0] == made[1]
    forecasts = [f for f in made[0] if f is not None]
    assert len(forecasts) == ((cut - 1) // 5 + 1) * len(MODELS)  # at minutes 1, 6, 11, ...
    assert all("upper_ratio_q0.99" in f.diagnostics for f in forecasts[-len(MODELS):])


def _decided(rows: list[dict[str, str]], cut: int) -> list[dict[str, str]]:
    """The rows, the demand of minute ``cut`` on left out (it is the changed data itself)."""
    first = (START + timedelta(minutes=cut)).strftime("%Y-%m-%d %H:%M:%S")
    return [row if row["minute"] < first else {k: v for k, v in row.items() if k != "demand_rps"}
            for row in rows]


def _assert_same_past(recorded: Timelines, changed: Timelines, cut: int, same_until: int,
                      minutes: int) -> None:
    for policy in ("predictive", "reactive"):
        before = _before(recorded[policy], same_until)
        assert len(before) == same_until * len(MODELS)
        assert _decided(_before(changed[policy], same_until), cut) == _decided(before, cut), (
            policy)
        # the future did change, and the policy answered it: the check compares real runs
        after = recorded[policy][len(before):]
        assert len(after) == (minutes - same_until) * len(MODELS)
        if len(changed[policy]) == len(recorded[policy]):
            assert [r["ready_replicas"] for r in changed[policy][len(before):]] != [
                r["ready_replicas"] for r in after], policy
        else:  # the file cut off at ``cut``
            assert len(changed[policy]) == cut * len(MODELS)


def test_static_sizes_for_the_whole_traces_peak_so_a_higher_future_peak_changes_its_past(
        simulated: Simulated) -> None:
    recorded = simulated(1, "", 0, ())["static"]
    changed = simulated(1, "x3 and zeros", CUT_AT_REFRESH, ())["static"]
    first_minute = [(r["ready_replicas"], r["gpus_billed"]) for r in recorded[:len(MODELS)]]
    assert [(r["ready_replicas"], r["gpus_billed"]) for r in changed[:len(MODELS)]] != first_minute
    assert {r["gpus_billed"] for r in changed} == {changed[0]["gpus_billed"]}  # all the time


def test_oracle_forecasts_are_hidden_from_help_and_labelled_wherever_a_run_reports(
        tmp_path: Path) -> None:
    """``--oracle-forecast`` (perfect foresight, benchmark only) is never a default, is not in
    ``--help``, and a run that uses it says so on stderr, in the table and in the JSON."""
    assert "oracle" not in CliRunner().invoke(cli_app(), ["--help"]).output.lower()
    trace = write_trace(tmp_path / "trace.csv", steps=6)  # one hour
    models = write_models(tmp_path / "models.yaml")
    common = ["--trace", str(trace), "--models", str(models), "--forecast-method", "persistence"]
    table = CliRunner().invoke(cli_app(), [*common, "--timeline-out", str(tmp_path / "T.csv"),
                                           "--oracle-forecast"])
    assert table.exit_code == 0, table.output
    said = " ".join(table.output.split())
    assert f"warning: {ORACLE_LABEL}" in said
    assert said.count("ORACLE forecasts (--oracle-forecast, benchmark only)") == 2  # + title
    for oracle in (True, False):
        result = CliRunner().invoke(cli_app(), [
            *common, "--timeline-out", str(tmp_path / f"{oracle}.csv"), "--json",
            *(["--oracle-forecast"] if oracle else [])])
        assert result.exit_code == 0, result.output
        document = json.loads(result.output[result.output.index("{"):])
        assert document["oracle_forecast"] is oracle
        methods = set(document["policies"]["predictive"]["forecast_methods"])
        assert (methods == {ORACLE}) is oracle, methods
        assert ("ORACLE" in result.output) is oracle
