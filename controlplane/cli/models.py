"""``headroom models``: the models ``headroom serve`` manages, in the store's models table, from
a models file (``controlplane.models_file``): import (checked whole, written in one statement),
list, remove (withdrawing the model's demand hints with it, unless told to keep them), pause and
resume (``controlplane.cli.models_pause``). With ``--config`` (serve's settings) import and remove
refuse a models table that serve would refuse (``check_models_table``), writing nothing; import
into a simulated fleet's store refuses a model it does not run (``check_import_into_sim_store``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from controlplane.cli.demo_store import settings_with_db
from controlplane.cli.helptext import reflowed
from controlplane.cli.json_errors import JsonOption, write_document
from controlplane.cli.models_pause import pause, resume
from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.cli.store_time import now_of, runs_a_simulated_fleet
from controlplane.cli.streams import print_warning, usage_error
from controlplane.domain.pause import ModelPause
from controlplane.domain.wording import counted
from forecaster.errors import InputError

if TYPE_CHECKING:  # imported where used: `headroom models --help` loads no store or numpy
    from controlplane.domain.models import ModelSpec, ProfilePoint
    from controlplane.domain.store_clock import StoreNow
    from controlplane.settings import Settings
    from controlplane.store import Store
    from controlplane.store.hints import ModelRemoval

app = typer.Typer(help="The models serve manages: import a models file, list, remove, pause, "
                       "resume.", no_args_is_help=True)
out = Console()


@app.callback()
def models() -> None:
    """The models serve manages: import a models file, list, remove, pause, resume."""


app.command("pause")(reflowed(pause))
app.command("resume")(reflowed(resume))


def changes(listed: list[ModelSpec], given: list[ModelSpec]) -> dict[str, list[str]]:
    """What importing ``given`` over ``listed`` does: new, updated and unchanged names."""
    before = {s.name: s for s in listed}
    return {"new": [s.name for s in given if s.name not in before],
            "updated": [s.name for s in given if s.name in before and before[s.name] != s],
            "unchanged": [s.name for s in given if before.get(s.name) == s]}


#: what import and remove say of a running serve when no --config names its settings, which
#: may refuse the new table (a budget's tenant or a static peak's model gone): unknown here
_UNCHECKED = " unless its settings refuse the new table (--config checks that first)"


def running_fleet(simulated: bool) -> str:
    """What import and remove name as the process that takes up the store's new models table:
    on a simulated fleet's store (``runs_a_simulated_fleet``) the demo, else serve's loop."""
    if simulated:
        return "a running `headroom demo` or serve --backend sim on this store"
    return "a running serve --backend kubernetes"


def serve_settings(config: Path | None, db: Path | None) -> Settings | None:
    """Serve's settings, which ``--config`` names (None without it: serve's are unknown), read
    once per command for its checks and pools; bad settings are a usage error."""
    from controlplane.settings import ConfigError

    if config is None:
        return None
    try:
        return settings_with_db(config, db)
    except ConfigError as error:
        raise usage_error(str(error)) from None


def check_as_serve(settings: Settings | None, config: Path | None, table: list[ModelSpec],
                   change: str, nothing: str) -> None:
    """With serve's ``settings`` (``--config``), ConfigError when serve refuses ``table``, the
    models table after ``change`` (``check_models_table``, as at its start and reload): a
    running serve would keep the old models (``models.reload_refused``) and a restarted one
    exit 2, so the command writes ``nothing``. Without them serve's settings are unknown."""
    from controlplane.reconcile_config import check_models_table
    from controlplane.settings import ConfigError

    if settings is None:
        return
    try:
        check_models_table(settings, tuple(table))
    except ConfigError as error:
        raise ConfigError(f"{config}: serve would refuse the models table {change}: {error}; "
                          f"{nothing}") from None


@app.command("import")
def import_models(
    file: Annotated[Path, typer.Argument(
        metavar="FILE", dir_okay=False,
        help="models YAML: a `models:` list of name, tenant, isolation, engine, latency_slo_ms, "
             "cold_start, profile points and optional min_replicas / max_replicas; "
             "deploy/examples/models.yaml is one, commented")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="check the file and say what "
                                          "would change; write nothing")] = False,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Add or update every model of FILE (others stay listed); serve uses them next tick."""
    from controlplane.domain.unplaced import no_pool_for
    from controlplane.models_file import load_model_specs
    from controlplane.models_yaml import ModelsFileError
    from controlplane.settings import pool_specs
    from controlplane.sim_start import check_import_into_sim_store
    from controlplane.store.engine import shown_url

    try:
        given = load_model_specs(file)
    except ModelsFileError as error:
        raise usage_error(str(error)) from None
    serve = serve_settings(config, db)

    def work(store: Store) -> tuple[dict[str, list[str]], bool]:
        listed = store.model_specs()
        found = changes(listed, given)
        simulated = runs_a_simulated_fleet(store)
        if simulated:
            check_import_into_sim_store(shown_url(store.engine), str(file),
                                        [s.name for s in given])
        if found["new"] or found["updated"]:
            table = {s.name: s for s in listed} | {s.name: s for s in given}
            check_as_serve(serve, config, list(table.values()), f"with {file} imported",
                           "nothing imported")
            if not dry_run:
                store.upsert_models(given)
        return found, simulated

    found, simulated = with_existing_store(config, db, work)
    verb = "would import" if dry_run else "imported"
    parts = [f"{kind} {', '.join(names)}" for kind, names in found.items() if names]
    out.print(f"{verb} {len(given)} model(s) from {file}: {'; '.join(parts)}"
              + ("" if dry_run or not (found["new"] or found["updated"]) else
                 f"; {running_fleet(simulated)} uses them from its next tick"
                 + ("" if config is not None else _UNCHECKED)),
              markup=False, highlight=False, soft_wrap=True)
    # only --config names the fleet's pools (serve's settings), as for `hint add`: without it
    # the settings' pools are the defaults, no fleet's, and a warning from them would mislead
    if serve is not None:
        pools = pool_specs(serve)
        for spec in given:
            if line := no_pool_for(spec, pools):
                print_warning(f"{file}: {line}")


@app.command("list")
def list_models(
    json_out: JsonOption = False,
    yaml_out: Annotated[bool, typer.Option(
        "--yaml", help="the models file that imports them back (models import's format, which "
                       "headroom simulate --models reads too); pauses are not in it")] = False,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """The store's models: tenant, isolation, engine, SLO, cold start, bounds, pause, profile."""
    from controlplane.cli.status_document import pause_json
    from controlplane.store.pauses import SqlModelPauses

    if json_out and yaml_out:
        raise usage_error("--json and --yaml: give one")

    def read(store: Store) -> tuple[list[ModelSpec], dict[str, ModelPause]]:
        pauses = SqlModelPauses(store.engine).paused_models()
        return store.model_specs(), {p.model: p for p in pauses}

    specs, paused = with_existing_store(config, db, read)
    if yaml_out:
        import yaml

        from controlplane.models_file import as_models_file

        if not specs:  # a file of no model would not import
            print_warning("no models listed: nothing written (headroom models import FILE)")
            return
        typer.echo(yaml.safe_dump(as_models_file(specs), sort_keys=False), nl=False)
        return
    if json_out:
        write_document(json.dumps([{**asdict(s), "paused": pause_json(paused.get(s.name))}
                                   for s in specs], indent=1, default=str))
        return
    if not specs:
        out.print("no models listed (headroom models import FILE)")
        return
    table = Table()
    for column in ("model", "tenant", "isolation", "engine", "SLO ms", "cold start p50/p90 s",
                   "replicas min/max", "paused", "profile (product/g or GPUs: rps)"):
        table.add_column(column, overflow="fold")
    for s in specs:
        points = ", ".join(point_cell(p) for p in s.profile)
        pause = paused.get(s.name)
        table.add_row(escape(s.name), escape(s.tenant), s.isolation.value, s.engine.value,
                      f"{s.latency_slo_ms:g}", f"{s.cold_start.p50_s:g}/{s.cold_start.p90_s:g}",
                      f"{_bound(s.min_replicas)}/{_bound(s.max_replicas)}",
                      "-" if pause is None else escape(_paused_cell(pause)), escape(points))
    out.print(table)


def point_cell(point: ProfilePoint) -> str:
    """A profile point as ``models list`` shows it: its product, its shape (a MIG instance's
    g, a whole GPU, or a replica's GPUs) and its throughput (``A100-80GB/3: 20``,
    ``L4/whole: 8``, ``H100-80GB/4 GPUs: 90``)."""
    shape = f"{point.gpus} GPUs" if point.gpus > 1 else point.compute_slices or "whole"
    return f"{point.product}/{shape}: {point.throughput_rps:g}"


def _bound(value: int | None) -> str:
    return "-" if value is None else str(value)


def _paused_cell(pause: ModelPause) -> str:
    held = "current" if pause.replicas is None else str(pause.replicas)
    return f"at {held} ({pause.reason()})"


@app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(metavar="NAME",
                                        help="a model of `headroom models list`")],
    keep_hints: Annotated[bool, typer.Option(
        "--keep-hints", help="keep NAME's demand hints (they apply again if NAME is "
                             "imported again); by default they are withdrawn with it")] = False,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Stop managing NAME (its history, plans and costs stay); serve stops at its next tick.

    NAME's demand hints not ended yet are withdrawn with it, in the same transaction (unless \
--keep-hints); the output lists them either way."""
    from controlplane.store.hints import remove_model_and_hints

    serve = serve_settings(config, db)

    def work(store: Store) -> tuple[ModelRemoval, StoreNow, bool]:
        listed = store.model_specs()
        if any(s.name == name for s in listed):
            check_as_serve(serve, config, [s for s in listed if s.name != name],
                           f"without {name!r}", "nothing removed")
        now = now_of(store)  # the loop's: a hint it still applies is not ended
        removal = remove_model_and_hints(store.engine, name, now.at, keep_hints=keep_hints)
        if removal is None:
            raise InputError(f"model {name!r} is not listed (see `headroom models list`)")
        return removal, now, runs_a_simulated_fleet(store)

    removal, now, simulated = with_existing_store(config, db, work)
    out.print(f"removed model {name}; {running_fleet(simulated)} stops managing it "
              "at its next tick" + ("" if config is not None else _UNCHECKED),
              markup=False, highlight=False, soft_wrap=True)
    for line in removal_lines(removal, now):
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def removal_lines(removal: ModelRemoval, now: StoreNow) -> list[str]:
    """What ``models remove`` says of the model's hints not ended at ``now`` (named with its
    clock, as ``hint list`` names it): none, withdrawn or kept."""
    from controlplane.cli.status_view import hint_line

    at = f"in force or ahead at {now.text()}"
    if not removal.hints:
        return [f"{removal.model} had no demand hint {at}"]
    counted_hints = counted(len(removal.hints), "demand hint")
    if removal.hints_withdrawn:
        head = f"withdrew its {counted_hints} {at} (--keep-hints keeps them):"
    else:
        head = (f"kept its {counted_hints} {at} (--keep-hints): they apply again "
                f"if {removal.model} is imported again; `headroom hint remove ID` withdraws one:")
    return [head, *(f"  {hint_line(h)}" for h in removal.hints)]
