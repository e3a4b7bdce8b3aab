"""``headroom simulate``: replay per-model demand through the real core on a simulated fleet.

``simulate_command`` is registered by the root CLI as the top-level command. Timelines: with one
``--policy``, ``--timeline-out T.csv`` is written as given; with several, one file per policy,
``T.<policy>.csv`` (``T.predictive.csv``, ``T.reactive.csv``, ...), and a side-by-side table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from controlplane.autoscaling.cost_ratios import SHORT_MINUTE_COST_RATIO, SHORTFALL_COST_RATIO
from controlplane.cli.json_errors import JsonOption, write_document
from controlplane.cli.numbers import float_option
from controlplane.cli.paths import check_output_path
from controlplane.cli.streams import print_note, print_warning, usage_error
from controlplane.domain.hints import rps_text
from controlplane.domain.timestamps import utc_text
from controlplane.simulation.hints_file import hints_outside, load_hints_file
from forecaster.errors import UnknownMethodError

if TYPE_CHECKING:  # imported where used: `headroom simulate --help` loads no pandas or numpy
    from controlplane.simulation.engine import SimOptions
    from controlplane.simulation.operator_settings import SimulateSettings
    from controlplane.simulation.runner import PolicyKnobs
    from controlplane.simulation.sim_config import SimConfig
    from controlplane.simulation.trace import Trace

_err = Console(stderr=True)
#: the policies' knobs by the option that sets them: their ValueErrors name the option
_KNOB_OPTIONS = {"target_utilization": "--reactive-target",
                 "shortfall_cost_ratio": "--shortfall-cost-ratio",
                 "short_minute_cost_ratio": "--short-minute-cost-ratio"}
_KNOB = re.compile(r"\b(" + "|".join(_KNOB_OPTIONS) + r")\b")


def _as_options(message: str) -> str:
    """A policy's refusal with its knobs named as the options that set them."""
    return _KNOB.sub(lambda match: _KNOB_OPTIONS[match.group(1)], message)


#: the options whose value a settings file may give, by parameter name (errors name the flag)
_FLAGS = {"tick_s": "--tick-s", "forecast_interval_s": "--forecast-interval-s",
          "forecast_method": "--forecast-method", "reactive_target": "--reactive-target",
          "shortfall_cost_ratio": "--shortfall-cost-ratio",
          "short_minute_cost_ratio": "--short-minute-cost-ratio"}


def _given(ctx: typer.Context, names: Iterable[str]) -> list[str]:
    """The options of ``names`` (parameter names) given on the command line."""
    return [name for name in names
            if (source := ctx.get_parameter_source(name)) is not None
            and source.name != "DEFAULT"]  # typer's own click: compared by name


def _from_settings(ctx: typer.Context, chosen: SimulateSettings | None,
                   values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The options' values: given on the command line, else the settings', else the default;
    and, for those the settings gave, the flag each error would name -> ``FILE: key``."""
    if chosen is None:
        return values, {}
    out, named = dict(values), {}
    given = set(_given(ctx, chosen.options))
    for name, value in chosen.options.items():
        if name not in given:
            out[name] = [value] if name == "policy" else value
            if name in _FLAGS:
                named[_FLAGS[name]] = chosen.where(name)
    return out, named


def _named(message: str, named: dict[str, str]) -> str:
    """A refusal of a value the settings gave, naming its file and key instead of the flag."""
    for flag, where in named.items():
        message = message.replace(f"{flag} must", f"{where}: must")
    return message


def _options_and_knobs(values: dict[str, Any], named: dict[str, str],
                       chosen: SimulateSettings | None, seed: int, oracle_forecast: bool,
                       profile_correction: bool, hints: Path | None, config: SimConfig
                       ) -> tuple[SimOptions, PolicyKnobs]:
    """The simulation's options and the policies' knobs of the resolved option values and the
    settings (ValueError naming the flag, or the settings file and key, of a bad value)."""
    from controlplane.autoscaling.profile_correction import CorrectionConfig
    from controlplane.simulation.engine import SimOptions
    from controlplane.simulation.runner import PolicyKnobs

    correction = CorrectionConfig() if profile_correction else None
    if chosen is not None and chosen.profile_correction is not None:
        correction = chosen.profile_correction[0] or correction  # the flag turns it on
    try:
        options = SimOptions(tick_s=values["tick_s"],
                             forecast_interval_s=values["forecast_interval_s"],
                             forecast_method=values["forecast_method"], seed=seed,
                             oracle_forecast=oracle_forecast, profile_correction=correction,
                             hints=load_hints_file(hints, [m.name for m in config.models])
                             if hints is not None else (),
                             hint_lead_s=values["hint_lead_s"],
                             **(chosen.sim_options if chosen is not None else {}))
    except ValueError as error:
        raise ValueError(_named(str(error), named)) from None
    knobs = PolicyKnobs(shortfall_cost_ratio=values["shortfall_cost_ratio"],
                        short_minute_cost_ratio=values["short_minute_cost_ratio"],
                        reactive_target_utilization=values["reactive_target"],
                        **(chosen.knobs if chosen is not None else {}))
    if chosen is not None and chosen.scale_down is not None:
        knobs = replace(knobs, scale_down=chosen.scale_down)
    return options, knobs


def _inputs(models: Path, cold_start: str | None, read_trace: Callable[..., Trace],
            chosen: SimulateSettings | None) -> tuple[SimConfig, Trace]:
    """The models file (every cold start ``--cold-start``'s, when given; a profile sized on the
    products of the settings' pools, when they give pools) and the trace
    (``read_trace``: ``load_trace`` with the options of the trace), both read even when one is
    refused, so that a run names the problems of both (ValueError, one line each); a trace read
    without the models file is not checked against its models."""
    from controlplane.simulation.config import (
        ModelsFileError,
        load_models_file,
        parse_cold_start_option,
    )
    from controlplane.simulation.trace import TraceError

    override = parse_cold_start_option(cold_start) if cold_start else None
    problems: list[str] = []
    config, replayed = None, None
    try:
        config = load_models_file(models, override, chosen.offered if chosen else None)
    except ModelsFileError as error:
        problems.append(str(error))
    try:
        replayed = read_trace(models=[m.name for m in config.models] if config else (),
                              single_series=config.models[0].name if config else "default")
    except TraceError as error:
        problems.insert(0, str(error))  # the options' order: --trace, then --models
    if config is None or replayed is None:
        raise ValueError("\n".join(problems))
    return config, replayed


#: said on stderr and in the table's title whenever ``--oracle-forecast`` is on
ORACLE_LABEL = ("ORACLE forecasts (--oracle-forecast, benchmark only): the predictive policy "
                "reads the trace's own future, so its numbers are a floor, not a result")


def capped_hint_lines(summary: dict[str, Any]) -> list[str]:
    """One line per model whose demand hint the fleet's capacity capped in a policy's run."""
    return [f"{summary['policy']}: the demand hint on {model} was capped in {capped['ticks']} "
            f"tick(s); at worst {capped['replicas']} replicas sized for "
            f"{capped['served_rps']:.0f} of {rps_text(capped['announced_rps'])} rps announced "
            f"({capped['limit']})"
            for model, capped in summary.get("hints_capped", {}).items()]


def forecast_line(summary: dict[str, Any]) -> str | None:
    """One line on the forecasts the predictive policy sized from that fell back or had no
    calibrated upper tail yet (a model's first hours), or None when none did."""
    from controlplane.autoscaling.calibration import MIN_ERRORS
    from controlplane.domain.demand import PREDICTIVE

    fallbacks, uncalibrated = summary["forecast_fallbacks"], summary["uncalibrated_forecasts"]
    if summary["policy"] != PREDICTIVE or not (fallbacks or uncalibrated):
        return None
    reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(fallbacks.items()))
    fell = f"{sum(fallbacks.values()):,} fell back ({reasons})" if fallbacks else "none fell back"
    return (f"{summary['policy']} forecasts: {summary['forecasts']:,} issued, {fell}, "
            f"{uncalibrated:,} "
            f"before the upper tail was calibrated ({MIN_ERRORS} errors scored): until then a "
            "model is sized from the forecast's own p90 (twice its p50 on a short history)")


def _table(summaries: list[dict[str, Any]], oracle_forecast: bool) -> Table:
    title = "headroom simulate" + (f" - {ORACLE_LABEL}" if oracle_forecast else "")
    table = Table(title=title, title_justify="left")
    for column in ("policy", "model-min", "short", "short %", "min any short", "shortfall %",
                   "GPU-h", "GPU-h / LB", "cost $"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for s in summaries:
        ratio = s["gpu_hours_over_lower_bound"]
        table.add_row(s["policy"], f"{s['model_minutes']:,}", f"{s['short_model_minutes']:,}",
                      f"{s['short_model_minutes_pct']:.3f}", f"{s['minutes_any_short']:,}",
                      f"{s['shortfall_pct_of_demand']:.4f}", f"{s['gpu_hours']:,.1f}",
                      "-" if ratio is None else f"{ratio:.3f}", f"{s['cost_usd']:,.0f}")
    return table


def simulate_command(
    trace: Annotated[Path, typer.Option("--trace", help="demand CSV: time, model, rate",
                                        dir_okay=False)],
    models: Annotated[Path, typer.Option("--models", help="models YAML (DESIGN.md format)",
                                         dir_okay=False)],
    timeline_out: Annotated[Path, typer.Option(
        "--timeline-out", help="timeline CSV; with several policies T.csv -> T.<policy>.csv",
        dir_okay=False)],
    policy: Annotated[list[str] | None, typer.Option(
        "--policy", help="predictive | reactive | static; repeat for a side-by-side table "
        "(default: predictive)")
    ] = None,
    time_col: Annotated[str, typer.Option("--time-col")] = "ts",
    series_col: Annotated[str, typer.Option("--series-col", help="'' for a single series")
                          ] = "model",
    value_col: Annotated[str, typer.Option("--value-col")] = "rate_rps",
    cold_start: Annotated[str | None, typer.Option(
        "--cold-start", help="override every model's cold start: a CSV of load latencies "
        "(column value, ms) or p50=S,p90=S in seconds")] = None,
    json_out: JsonOption = False,
    seed: Annotated[int, typer.Option(help="seed of cold-start and provisioning draws")] = 1,
    value_unit: Annotated[str, typer.Option(
        "--value-unit", help="rps | rpm | per-step (a count per trace step)")] = "rps",
    time_unit: Annotated[str | None, typer.Option(
        "--time-unit", help="s | ms | min | h, for a numeric time column")] = None,
    fill_gaps: Annotated[str, typer.Option(
        "--fill-gaps", help="none (refuse gaps) | hold (the last value; before a model's "
        "first row, its first) | zero | hold-after-first (hold; before a model's first row, "
        "zero: a model added inside the trace)")] = "none",
    forecast_method: Annotated[str, typer.Option(
        "--forecast-method", help="forecaster method (forecaster registry)")] = "auto",
    forecast_interval_s: Annotated[float, float_option(
        "--forecast-interval-s", help="simulated seconds between forecast refreshes")] = 300.0,
    tick_s: Annotated[float, float_option("--tick-s", help="reconcile interval (divides 60)")
                      ] = 30.0,
    shortfall_cost_ratio: Annotated[float, float_option(
        "--shortfall-cost-ratio", help="predictive: price of one replica-hour of unserved "
        "demand / price of a replica-hour")] = SHORTFALL_COST_RATIO,
    short_minute_cost_ratio: Annotated[float, float_option(
        "--short-minute-cost-ratio", help="predictive: price of one short model-minute in "
        "replica-hours; hot replicas hold the next forecast step's quantile that this price "
        "pays for, per model (0: no headroom)")] = SHORT_MINUTE_COST_RATIO,
    reactive_target: Annotated[float, float_option(
        "--reactive-target", help="reactive: target utilization")] = 0.8,
    oracle_forecast: Annotated[bool, typer.Option(
        "--oracle-forecast", hidden=True, help="BENCHMARK ONLY: forecasts read from the trace's "
        "own future (perfect foresight), to measure the floor node granularity, whole replicas "
        "and cold starts impose")] = False,
    profile_correction: Annotated[bool, typer.Option(
        "--profile-correction", help="predictive: correct each model's per-replica throughput "
        "online from observed load per replica and the simulated mean latency, as the live loop "
        "does (true capacity: the models file's true_per_replica_rps); reactive and static keep "
        "the offline profile")] = False,
    hints: Annotated[Path | None, typer.Option(
        "--hints", dir_okay=False, help="predictive: demand announced ahead, CSV "
        "model,start,end,rate_rps[,reason] (ISO-8601 times): floors on the forecasts, as "
        "`headroom hint add` sets for the live loop")] = None,
    hint_lead_s: Annotated[float, float_option(
        "--hint-lead-s", min=0.0, max=1200.0,
        help="a hint floors the forecast from this long before it starts")] = 600.0,
    config_file: Annotated[Path | None, typer.Option(
        "--config", "-c", dir_okay=False, help="the YAML settings file of `headroom serve` "
        "(and HEADROOM_* variables), checked as serve checks it: the keys it sets of safety "
        "(steps, stabilization, cooldown, disruption budgets, cluster_gpu_budget), autoscaling "
        "(policy, cost ratios, reaction_s, keep_s, node_stabilization_s, "
        "reactive_target_utilization, hint_lead_s, tenant_gpu_budgets, profile_correction), "
        "reconcile (interval_s, target_utilization, max_forecast_age_s, stale_headroom) and "
        "forecast (interval_s, method, horizon_s, history_s) are simulated; its pools replace "
        "the models file's fleet (each model's GPU product on its pool's nodes, node bounds "
        "and price); the rest (store, backend, ...) is named on stderr and ignored. "
        "Precedence: an option given here "
        "(--policy, --tick-s, --forecast-interval-s, --forecast-method, --shortfall-cost-ratio, "
        "--short-minute-cost-ratio, --reactive-target, --hint-lead-s, --profile-correction) > "
        "the settings > the models file's GPU budgets and pools > the defaults; keys not set keep "
        "simulate's defaults, which differ from serve's for autoscaling.profile_correction "
        "(off; serve on), reconcile.target_utilization (1; serve 0.8), "
        "safety.max_replica_step (200; serve 8), safety.max_node_step (predictive 16, "
        "reactive 10; serve 4): set them here to simulate serve's (--json's "
        "effective_settings gives, per policy, every key's value, serve's default and where "
        "it came from)")] = None,
    *, ctx: typer.Context,
) -> None:
    """Replay per-model demand through the real core and a simulated fleet.

    Cold starts are sampled; the per-minute timeline is written, and short model-minutes,
    GPU-hours and cost are printed (a side-by-side table for several policies)."""
    from controlplane.domain.demand import PREDICTIVE
    from controlplane.settings import ConfigError, load_settings
    from controlplane.simulation.config import ModelsFileError
    from controlplane.simulation.effective_settings import (
        effective_settings,
        pools_used,
        sources,
        unlike_serve,
        unlike_serve_note,
    )
    from controlplane.simulation.operator_settings import (
        OPTION_SETTINGS,
        simulate_settings,
        with_budgets,
        with_pools,
    )
    from controlplane.simulation.runner import check_policies, simulate
    from controlplane.simulation.timeline import check_not_inputs, timeline_paths
    from controlplane.simulation.trace import TraceError, load_trace
    from forecaster.registry import get_forecaster

    try:  # everything the user gave is checked before the first simulated minute
        chosen = (simulate_settings(load_settings(config_file), str(config_file))
                  if config_file is not None else None)
        values, named = _from_settings(ctx, chosen, {
            "policy": policy, "tick_s": tick_s, "forecast_interval_s": forecast_interval_s,
            "forecast_method": forecast_method, "shortfall_cost_ratio": shortfall_cost_ratio,
            "short_minute_cost_ratio": short_minute_cost_ratio,
            "reactive_target": reactive_target, "hint_lead_s": hint_lead_s})
        names = values["policy"] or ["predictive"]
        config, replayed = _inputs(models, cold_start, partial(
            load_trace, trace, time_col=time_col, series_col=series_col or None,
            value_col=value_col, value_unit=value_unit, fill_gaps=fill_gaps, time_unit=time_unit),
            chosen)
        if chosen is not None:
            config = with_pools(with_budgets(config, chosen), chosen)
        options, knobs = _options_and_knobs(values, named, chosen, seed, oracle_forecast,
                                            profile_correction, hints, config)
        try:
            check_policies(names, replayed, config, knobs, options)
        except ValueError as error:
            raise ValueError(_named(_as_options(str(error)), named)) from None
        check_not_inputs(timeline_out, timeline_paths(timeline_out, names), {
            "--trace": trace, "--models": models, **({"--hints": hints} if hints else {}),
            **({"--config": config_file} if config_file else {}),
            **{f"{what} samples ({m.name})": cold.samples_csv for m in config.models
               for what, cold in (("cold-start", m.cold_start),
                                  ("true cold-start", m.true_cold_start))
               if cold.samples_csv is not None}})
        for path in timeline_paths(timeline_out, names).values():
            check_output_path(path, "--timeline-out", {})
        try:
            get_forecaster(options.forecast_method)
        except UnknownMethodError as error:
            raise ValueError(f"{named['--forecast-method']}: {error}" if "--forecast-method"
                             in named else str(error)) from None
    except (ConfigError, ModelsFileError, TraceError, UnknownMethodError, ValueError) as error:
        raise usage_error(str(error)) from None
    for warning in (*replayed.warnings, *config.warnings):
        print_warning(warning)
    if oracle_forecast:
        print_warning(ORACLE_LABEL)
    if hints is not None and PREDICTIVE not in names:
        print_warning(f"--hints {hints}: demand hints only shape the predictive policy; "
                      f"{', '.join(names)} never read them (add --policy predictive to compare)")
    for hint in hints_outside(options.hints, replayed.start_at,
                              replayed.minute_at(replayed.minutes), options.hint_lead_s):
        print_warning(f"--hints {hints}: the hint on {hint.model} from {utc_text(hint.start_at)} "
                      f"until {utc_text(hint.end_at)} is outside the trace ("
                      f"{utc_text(replayed.start_at)} to "
                      f"{utc_text(replayed.minute_at(replayed.minutes))}) and shapes nothing")
    if chosen is not None and chosen.ignored:
        print_warning(f"simulate ignores the settings {', '.join(chosen.ignored)} ({config_file} "
                      "and HEADROOM_* variables): they set up the live control plane; the models "
                      "file gives the simulated fleet")
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed:,.0f}/{task.total:,.0f} min"),
                      TimeElapsedColumn(), console=_err, transient=True) as progress:
            tasks = {n: progress.add_task(f"simulating {n}", total=replayed.minutes)
                     for n in names}
            result = simulate(replayed, config, names, timeline_out, options, knobs,
                              lambda n, m: progress.update(tasks[n], completed=m + 1))
    except OSError as error:
        raise usage_error(f"{error.filename or timeline_out}: {error.strerror}") from None
    for summary in result.summaries:
        for line in capped_hint_lines(summary):
            print_warning(line)
    came_from = sources(chosen, _given(ctx, [*OPTION_SETTINGS, "profile_correction"]), config)
    used = {p.name: effective_settings(p, options, config, came_from) for p in result.policies}
    if json_out:
        write_document(json.dumps({
            "ok": True, "trace": str(trace), "models": str(models),
            "minutes": replayed.minutes, "trace_step_s": replayed.step_s,
            "fill_gaps": fill_gaps, "filled_gap_minutes": dict(replayed.filled), "seed": seed,
            "oracle_forecast": oracle_forecast,
            "hints": str(hints) if hints is not None else None,
            **({"config": str(config_file)} if config_file is not None else {}),
            "timelines": {k: str(v) for k, v in result.timelines.items()},
            "policies": {s["policy"]: s for s in result.summaries},
            "effective_settings": used, "pools": pools_used(config, chosen)},
            indent=2, allow_nan=False))
        return
    note = unlike_serve_note(unlike_serve(used))
    if note is not None:
        print_note(note)
    Console(width=max(130, Console().width)).print(_table(list(result.summaries), oracle_forecast))
    for line in filter(None, map(forecast_line, result.summaries)):
        typer.echo(line)
    for name, path in result.timelines.items():
        typer.echo(f"timeline {name}: {path}")
