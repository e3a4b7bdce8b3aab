"""`headroom trace export`: the demand the loop observed, as the trace `headroom simulate`
replays (SQLite and PostgreSQL), and the demo's own history replayed through it."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clihelpers import demo_on_store
from clihelpers import headroom_on_store as _headroom

from controlplane.models_file import load_model_specs
from controlplane.store import Store
from dashboard import whatif

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "models.yaml"
AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def _store_with(url: str, rows: Sequence[tuple[str, float, float]]) -> None:
    """The example's two models, and observations (model, seconds after AT, rps)."""
    store = Store.open(url, migrate=True)
    store.upsert_models(load_model_specs(EXAMPLE))
    store.save_observations([(m, AT + timedelta(seconds=s), rps) for m, s, rps in rows])
    store.engine.dispose()


def _flat(text: str) -> str:
    return " ".join(text.split())


TICKS = [("llama-3-8b-chat", 0, 10.0), ("llama-3-8b-chat", 30, 20.0),
         ("llama-3-8b-chat", 60, 30.0), ("llama-3-8b-chat", 90, 30.0),
         ("resnet50", 0, 100.0), ("resnet50", 30, 100.0), ("resnet50", 60, 200.0),
         ("resnet50", 90, 400.0)]


def test_the_export_is_each_models_mean_observed_rate_per_minute_in_simulates_columns(
        store_url: str, tmp_path: Path) -> None:
    _store_with(store_url, TICKS)
    out = tmp_path / "trace.csv"
    done = _headroom(store_url, "trace", "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == ("ts,model,rate_rps\n"
                               "2026-12-03T08:00:00Z,llama-3-8b-chat,15.0\n"
                               "2026-12-03T08:00:00Z,resnet50,100.0\n"
                               "2026-12-03T08:01:00Z,llama-3-8b-chat,30.0\n"
                               "2026-12-03T08:01:00Z,resnet50,300.0\n")
    assert _flat(done.stderr) == (f"wrote 4 rows of 2 model(s) to {out}: 2026-12-03 08:00 .. "
                                  "2026-12-03 08:02 UTC, a row per model and 60 s step")


def test_until_days_models_and_step_choose_the_window_the_models_and_the_grid(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _store_with(url, TICKS)
    out = tmp_path / "trace.csv"
    done = _headroom(url, "trace", "export", "--out", str(out), "--models", "resnet50",
                     "--until", "2026-12-03T08:01:00Z")
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "ts,model,rate_rps\n2026-12-03T08:00:00Z,resnet50,100.0\n"
    done = _headroom(url, "trace", "export", "--out", str(out), "--step-s", "30", "--days",
                     "0.001")  # 86.4 s back from 08:02: from 08:00:30 on
    assert done.returncode == 0, done.stderr
    assert out.read_text() == ("ts,model,rate_rps\n"
                               "2026-12-03T08:00:30Z,llama-3-8b-chat,20.0\n"
                               "2026-12-03T08:00:30Z,resnet50,100.0\n"
                               "2026-12-03T08:01:00Z,llama-3-8b-chat,30.0\n"
                               "2026-12-03T08:01:00Z,resnet50,200.0\n"
                               "2026-12-03T08:01:30Z,llama-3-8b-chat,30.0\n"
                               "2026-12-03T08:01:30Z,resnet50,400.0\n")


def test_a_step_without_an_observation_is_a_gap_named_on_stderr_that_simulate_refuses(
        store_url: str, tmp_path: Path) -> None:
    _store_with(store_url, [("llama-3-8b-chat", 0, 10.0), ("llama-3-8b-chat", 120, 12.0),
                            ("resnet50", 0, 100.0), ("resnet50", 60, 110.0),
                            ("resnet50", 120, 120.0)])
    out = tmp_path / "trace.csv"
    done = _headroom(store_url, "trace", "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "2026-12-03T08:01:00Z,llama-3-8b-chat" not in out.read_text()  # no zero: no row
    assert ("warning: model 'llama-3-8b-chat': 1 of 3 steps without an observation, first at "
            "2026-12-03T08:01:00Z: gaps, not zeros (simulate replays them with --fill-gaps hold "
            "or zero)") in _flat(done.stderr)
    models = tmp_path / "models.yaml"
    models.write_text(_headroom(store_url, "models", "list", "--yaml").stdout)
    replay = ["simulate", "--trace", str(out), "--models", str(models), "--timeline-out",
              str(tmp_path / "timeline.csv")]
    refused = _headroom(store_url, *replay)
    assert refused.returncode == 2
    assert "model 'llama-3-8b-chat': no data for 1 minute(s)" in _flat(refused.stderr)
    filled = _headroom(store_url, *replay, "--fill-gaps", "hold")
    assert filled.returncode == 0, filled.stderr


def test_a_model_without_an_observation_in_the_window_is_named_and_left_out(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _store_with(url, [("resnet50", 0, 100.0)])
    out = tmp_path / "trace.csv"
    done = _headroom(url, "trace", "export", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "ts,model,rate_rps\n2026-12-03T08:00:00Z,resnet50,100.0\n"
    assert ("warning: model 'llama-3-8b-chat': no observation in the window: not in the trace "
            "(simulate refuses a models file that lists it)") in _flat(done.stderr)
    assert "wrote 1 rows of 1 model(s)" in _flat(done.stderr)


@pytest.mark.parametrize(("args", "expected"), [
    (["--models", "llama-3-8b-chat,gpt-9"], "--models: model 'gpt-9' is not in the store's "
                                             "models table"),
    (["--step-s", "7"], "--step-s 7: simulate replays a step that divides a minute"),
    (["--until", "2026-12-03T07:00:00Z"], "--until 2026-12-03T07:00:00Z: at or before the "
                                          "store's first observation's step"),
    (["--until", "noon"], "--until 'noon': not an ISO-8601 time"),
])
def test_bad_options_are_refused_naming_the_option_and_nothing_is_written(
        tmp_path: Path, args: list[str], expected: str) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _store_with(url, TICKS)
    out = tmp_path / "trace.csv"
    done = _headroom(url, "trace", "export", "--out", str(out), *args)
    assert done.returncode == 2
    assert expected in _flat(done.stderr)
    assert not out.exists()


def test_the_store_itself_as_out_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    _store_with(f"sqlite:///{db}", TICKS)
    before = db.read_bytes()
    done = _headroom(f"sqlite:///{db}", "trace", "export", "--db", str(db), "--out", str(db))
    assert done.returncode == 2
    assert (f"--out {db}: is the input file of the store (db.url); it would be overwritten"
            in _flat(done.stderr))
    assert db.read_bytes() == before


def test_a_store_without_observations_exports_nothing_and_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _store_with(url, [])
    out = tmp_path / "trace.csv"
    done = _headroom(url, "trace", "export", "--out", str(out))
    assert done.returncode == 1
    assert "has no models or no observed load yet; nothing to export" in _flat(done.stderr)
    assert not out.exists()


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=UTC)


def _rows(path: Path, time_col: str, value_col: str) -> dict[tuple[datetime, str], float]:
    with path.open() as f:
        return {(_at(r[time_col]), r["model"]): float(r[value_col]) for r in csv.DictReader(f)}


def test_the_demos_history_replays_in_simulate_and_its_own_minutes_score_beside_it(
        store_url: str, tmp_path: Path) -> None:
    demo = demo_on_store(store_url, tmp_path)
    trace, models = tmp_path / "trace.csv", tmp_path / "models.yaml"
    done = _headroom(store_url, "trace", "export", "--out", str(trace), "--days", str(30 / 1440))
    assert done.returncode == 0, done.stderr
    models.write_text(_headroom(store_url, "models", "list", "--yaml").stdout)
    simulated = tmp_path / "simulated.csv"
    replayed = _headroom(store_url, "simulate", "--trace", str(trace), "--models", str(models),
                         "--timeline-out", str(simulated))
    assert replayed.returncode == 0, replayed.stderr
    exported = _rows(trace, "ts", "rate_rps")
    assert len({m for _, m in exported}) == 6 and len(exported) == 6 * 30
    assert _rows(simulated, "minute", "demand_rps") == pytest.approx(exported)

    recorded = tmp_path / "recorded.csv"
    scored = _headroom(store_url, "trace", "timeline", "--out", str(recorded))
    assert scored.returncode == 0, scored.stderr
    own = _rows(recorded, "minute", "demand_rps")
    # the demo's 20 minutes, each model's demand the mean of the same observations as the trace's
    assert sorted({at for at, _ in own}) == [_at("2026-12-03T08:00:00Z") + timedelta(minutes=i)
                                             for i in range(20)]
    assert own == pytest.approx({k: exported[k] for k in own}) and len(own) == 6 * 20
    frames = whatif.read_timelines(recorded.read_bytes(), recorded.name)
    outcome = whatif.summarize("recorded", next(iter(frames.values())), 1.0)
    assert outcome.gpu_hours == pytest.approx(demo["gpu_hours"])  # what the demo billed
    assert (f"wrote 120 rows (20 minutes) to {recorded}: 2026-12-03 08:00 .. 2026-12-03 08:20 "
            f"UTC; {outcome.short_model_minutes} short model-minutes") in _flat(scored.stderr)
    one = _headroom(store_url, "trace", "timeline", "--out", str(recorded), "--models",
                    "bert-embed", "--until", "2026-12-03T08:10:30Z", "--days", str(6 / 1440))
    assert one.returncode == 0, one.stderr
    assert sorted(_rows(recorded, "minute", "demand_rps")) == [
        (_at("2026-12-03T08:04:00Z") + timedelta(minutes=i), "bert-embed") for i in range(6)]


def test_a_store_without_ticks_has_no_timeline_to_export(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    _store_with(url, TICKS)  # observations, but no reconcile tick
    out = tmp_path / "recorded.csv"
    done = _headroom(url, "trace", "timeline", "--out", str(out))
    assert done.returncode == 1
    assert "has no models or no reconcile ticks yet; nothing to export" in _flat(done.stderr)
    assert not out.exists()
