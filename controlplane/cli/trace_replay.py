"""``headroom trace replay``: the loop's own demand replayed through ``headroom simulate`` with
serve's settings and pools, scored beside what the loop did over the same model-minutes.

It writes, into ``--out-dir``, the inputs an operator edits to ask "what would another setting
have done with this traffic?" and re-runs ``headroom simulate`` on: ``trace.csv`` (``trace
export``, from ``--warmup-days`` before the window so the forecaster warms up as the live one
did), ``models.yaml`` (``models list --yaml``, each replica credited with what the fleet reported
it to serve), ``settings.yaml`` (serve's values of every key simulate honours, and its pools),
``recorded.csv`` (``trace timeline``) and simulate's timelines. Simulate runs as a child process
(``python -m controlplane.cli simulate``), exactly as an operator would run it on those files.
With ``--set KEY=VALUE``, simulate runs again on ``settings.changed.yaml`` (serve's values with
the changes); with ``--sweep KEY=V1,V2``, once a value (``settings.sweep-N.yaml``). Every replay
has the same seed, so they draw the same cold starts and differ only by the change.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from controlplane.cli.json_errors import JsonOption, write_document
from controlplane.cli.numbers import float_option
from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.cli.streams import print_warning, usage_error
from controlplane.cli.times import parse_utc
from controlplane.cli.trace import (
    DaysOption,
    ModelsOption,
    TickUntilOption,
    models_of,
    nothing,
    recorded_minutes,
)
from forecaster.errors import InputError

if TYPE_CHECKING:  # imported where used: `headroom trace --help` loads no store
    from controlplane.domain.models import ModelSpec
    from controlplane.replay_changes import Variant
    from controlplane.simulation.engine import MinuteRow
    from controlplane.store import Store
    from forecaster.types import TrafficSeries

console = Console(stderr=True)


def _read(store: Store, models: str | None, until_at: datetime | None, days: float,
          warmup_days: float) -> tuple[datetime, datetime, tuple[TrafficSeries, ...],
                                       tuple[MinuteRow, ...], list[ModelSpec], bool] | None:
    """The window's recorded minutes (as ``trace timeline`` reads them), the demand from
    ``warmup_days`` before it (as ``trace export`` reads it), the models' specs and whether
    the store is a simulated fleet's."""
    from controlplane import trace_export
    from controlplane.cli.store_time import runs_a_simulated_fleet

    wanted = models_of(store, models)
    recorded, observed = (recorded_minutes(store, wanted, days, until_at),
                          trace_export.observation_span(store))
    if recorded is None or observed is None:
        return None
    since_at, end_at, rows = recorded
    first_at = max(trace_export.on_grid(observed[0], 60), since_at - timedelta(days=warmup_days))
    series = tuple(store.rate_history(m, first_at, end_at, 60) for m in wanted)
    specs = [s for s in store.model_specs() if s.name in wanted]
    return since_at, end_at, series, rows, specs, runs_a_simulated_fleet(store)


def _simulate_args(out_dir: Path, policies: list[str], seed: int, settings_name: str,
                   timeline_name: str) -> list[str]:
    """``headroom simulate``'s arguments on the written inputs, as an operator re-runs them."""
    return ["--trace", str(out_dir / "trace.csv"), "--models", str(out_dir / "models.yaml"),
            "--config", str(out_dir / settings_name), "--fill-gaps", "hold-after-first",
            "--seed", str(seed), "--timeline-out", str(out_dir / timeline_name),
            *(a for p in policies for a in ("--policy", p))]


def _simulate(args: list[str]) -> dict[str, Any]:
    """``headroom simulate`` on ``args``, without the ``HEADROOM_*`` variables (the settings
    file holds their values already); its own errors end the replay with its exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    done = subprocess.run([sys.executable, "-m", "controlplane.cli", "simulate", *args,
                           "--json"], stdout=subprocess.PIPE, text=True, check=False, env=env)
    if done.returncode != 0:
        raise typer.Exit(done.returncode)
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _changed_settings(serve_doc: dict[str, Any], changes: dict[str, Any],
                      replays: tuple[Variant, ...]) -> dict[str, dict[str, Any]]:
    """Each replay's settings file by its label, checked as serve checks its own: a change
    that cannot be made or that serve would refuse ends the command before the store is
    read."""
    from controlplane.replay_changes import with_changes
    from controlplane.settings import ConfigError, load_settings

    docs: dict[str, dict[str, Any]] = {}
    try:
        with_changes(serve_doc, changes)  # --set's own problems first
        for variant in replays:
            docs[variant.label] = with_changes(serve_doc, variant.changes, variant.option)
            try:
                load_settings(None, **docs[variant.label])
            except ConfigError as error:  # serve's own values were checked: the change is wrong
                raise usage_error(f"{variant.option}: "
                                  f"{str(error).removeprefix('configuration: ')}") from None
    except InputError as error:
        raise usage_error(str(error)) from None
    return docs


def _print(scores: dict[str, dict[str, Any]], replays: list[dict[str, Any]]) -> None:
    """The scores' table and each replay's changes beside serve's values."""
    # wide enough for a sweep's labels: a table's columns fold a long label otherwise
    Console(width=max(100, Console().width, 80 + max(map(len, scores)))).print(_table(scores))
    for variant in replays:
        typer.echo(f"({variant['label']}) " + "; ".join(
            f"{change['key']}: {json.dumps(change['replay'])} (serve: "
            f"{json.dumps(change['serve'])})" for change in variant["changes"]))


def _table(scores: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="the loop's minutes, recorded and replayed")
    for column in ("timeline", "model-minutes", "short", "short %", "GPU-h", "GPU-h / LB",
                   "cost"):
        table.add_column(column, justify="left" if column == "timeline" else "right")
    for label, score in scores.items():
        ratio = score["gpu_hours_over_lower_bound"]
        table.add_row(label, f"{score['model_minutes']:,}", f"{score['short_model_minutes']:,}",
                      f"{score['short_model_minutes_pct']:.3f}", f"{score['gpu_hours']:,.1f}",
                      "-" if ratio is None else f"{ratio:.3f}", f"${score['cost_usd']:,.2f}")
    return table


def replay(
    out_dir: Annotated[Path, typer.Option(
        "--out-dir", "-o", file_okay=False, help="directory for the trace, models file, "
        "settings file and timelines (created; files of the same names are replaced)")],
    models: ModelsOption = None,
    until: TickUntilOption = None,
    days: DaysOption = 1.0,
    warmup_days: Annotated[float, float_option(
        help="days of demand before the window that the simulation replays first, unscored, "
             "so its forecaster warms up as the loop's did", min=0.0, max=60.0)] = 1.0,
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", help=escape("predictive, reactive or static (repeatable) [default: "
                                "serve's autoscaling.policy]"))] = None,
    seed: Annotated[int, typer.Option(help="seed of simulate's cold-start and provisioning "
                                           "draws")] = 1,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="replay again with this setting changed (a key "
        "simulate honours, pools or pools.NAME.FIELD; the value in YAML; repeatable) and "
        "score both")] = None,
    sweep: Annotated[str | None, typer.Option(
        "--sweep", metavar="KEY=V1,V2,...", help="replay once a value of this setting (as "
        "--set takes; with the --set changes) and score each beside serve's")] = None,
    json_out: JsonOption = False,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Replay the loop's demand through headroom simulate, scored beside what the loop did."""
    import yaml

    from controlplane import trace_export
    from controlplane.cli.demo_store import settings_with_db
    from controlplane.replay_changes import parse_changes, parse_sweep, value_at, variants
    from controlplane.replay_inputs import (
        pool_prices,
        replay_models_file,
        replay_settings,
        reported_replica_rps,
    )
    from controlplane.settings import ConfigError
    from controlplane.simulation.timeline import (
        billed_cost_usd,
        headline,
        read_timeline,
        write_timeline,
    )

    try:
        until_at = None if until is None else parse_utc(until, "--until")
        changes = parse_changes(set_ or [])
        replays = variants(changes, None if sweep is None else parse_sweep(sweep, changes))
        settings = settings_with_db(config, db)
    except (InputError, ConfigError) as error:
        raise usage_error(str(error)) from None
    serve_doc = replay_settings(settings)
    docs = _changed_settings(serve_doc, changes, replays)
    got = with_existing_store(config, db, lambda store: _read(store, models, until_at, days,
                                                              warmup_days))
    if got is None:
        raise nothing(settings.db.url, "reconcile ticks or observed load", "replay")
    since_at, end_at, series, rows, specs, simulated_fleet = got
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise usage_error(f"--out-dir {out_dir}: {error.strerror or error}") from None
    for line in trace_export.gap_warnings(series):
        print_warning(line)
    observed = {s.series_id for s in series if s.observed_count()}
    specs = [s for s in specs if s.name in observed]
    (out_dir / "trace.csv").write_text(trace_export.trace_csv(series)[0], encoding="utf-8")
    (out_dir / "models.yaml").write_text(yaml.safe_dump(
        replay_models_file(specs, reported_replica_rps(rows), settings, simulated_fleet),
        sort_keys=False))
    (out_dir / "settings.yaml").write_text(yaml.safe_dump(serve_doc, sort_keys=False))
    write_timeline(out_dir / "recorded.csv", rows)
    runs = {"serve": _simulate_args(out_dir, policy or [], seed, "settings.yaml",
                                    "simulated.csv")}
    for variant in replays:
        (out_dir / variant.settings_name).write_text(yaml.safe_dump(docs[variant.label],
                                                                    sort_keys=False))
        runs[variant.label] = _simulate_args(out_dir, policy or [], seed, variant.settings_name,
                                             variant.timeline_name)
    # the changed settings first: a value only simulate checks (a forecast method) fails fast
    simulated = {name: _simulate(runs[name]) for name in reversed(runs)}
    scored = {(r.minute_at, r.model) for r in rows}

    def score(minutes: Sequence[MinuteRow], prices: dict[str, float]) -> dict[str, Any]:
        return headline(minutes) | {"cost_usd": billed_cost_usd(minutes, prices)}

    def scores_of(doc: dict[str, Any], suffix: str, prices: dict[str, float]
                  ) -> dict[str, dict[str, Any]]:
        return {name + suffix: score([r for r in read_timeline(Path(path))
                                      if (r.minute_at, r.model) in scored], prices)
                for name, path in doc["timelines"].items()}

    scores = {"recorded": score(rows, pool_prices(serve_doc))} | scores_of(
        simulated["serve"], "", pool_prices(serve_doc))
    for variant in replays:
        scores |= scores_of(simulated[variant.label], f" ({variant.label})",
                            pool_prices(docs[variant.label]))
    document: dict[str, Any] = {"simulate": simulated["serve"], "variants": [
        {"label": variant.label, "settings": str(out_dir / variant.settings_name),
         "changes": [{"key": key, "serve": value_at(serve_doc, key), "replay": value}
                     for key, value in variant.changes.items()],
         "simulate": simulated[variant.label]} for variant in replays]}
    window = {"since": since_at.isoformat(), "until": end_at.isoformat()}
    rerun = {name: shlex.join(["headroom", "simulate", *args]) for name, args in runs.items()}
    if json_out:
        write_document(json.dumps({"ok": True, "window": window, "out_dir": str(out_dir),
                                   "scores": scores, "rerun": rerun} | document, indent=2))
        return
    _print(scores, document["variants"])
    typer.echo(f"window {since_at:%Y-%m-%d %H:%M} .. {end_at:%Y-%m-%d %H:%M} UTC, the recorded "
               f"model-minutes only; inputs and timelines in {out_dir}; edit them and re-run:")
    for command in rerun.values():
        typer.echo(f"  {command}")
