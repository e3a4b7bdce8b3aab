"""``headroom fleet pause`` / ``resume``: the hands-off switch. While the store holds the fleet's
pause every reconcile tick still observes, sizes and plans, and records its plan as a dry run,
but changes nothing; serve reads it at its next tick (no restart)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from controlplane.cli.helptext import reflowed
from controlplane.cli.models_pause import operator_name
from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.cli.store_time import now_of
from controlplane.domain.fleet_pause import WHY_CHARS, FleetPause, FleetPauseSet

if TYPE_CHECKING:  # imported where used: `headroom fleet --help` loads no store
    from controlplane.store import Store

app = typer.Typer(help="The whole fleet: pause every change the loop makes, resume.",
                  no_args_is_help=True)
out = Console()


@app.callback()
def fleet() -> None:
    """The whole fleet: pause every change the loop makes, resume."""


@app.command("pause")
@reflowed
def pause(
    reason: Annotated[str | None, typer.Option(
        "--reason", metavar="TEXT", help=f"why (at most {WHY_CHARS} characters), shown by "
        "headroom status, the dashboard and each paused tick's record; given again, it "
        "replaces the reason a paused fleet has")] = None,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Pause every change the reconcile loop makes (serve reads it at its next tick).

    Each tick still observes, forecasts, sizes and plans, and records its plan as a dry run;
    no replica, node pool or device-plugin config is changed and no MIG re-layout started
    until `headroom fleet resume` (one in flight is carried to its end). The placement API and
    KEDA's scaler keep answering. A paused fleet stays paused since when, and by whom, it was
    first paused."""
    from controlplane.store.fleet_pause import SqlFleetPause

    if reason is not None and len(reason) > WHY_CHARS:
        raise typer.BadParameter(f"at most {WHY_CHARS} characters, got {len(reason)}",
                                 param_hint="--reason")

    def work(store: Store) -> FleetPauseSet:
        return SqlFleetPause(store.engine).pause(now_of(store).at, operator_name(), reason)

    out.print(with_existing_store(config, db, work).line(), markup=False, highlight=False,
              soft_wrap=True)


@app.command("resume")
@reflowed
def resume(config: ConfigOption = None, db: DbOption = None) -> None:
    """Let the reconcile loop change the fleet again (serve reads it at its next tick)."""
    from controlplane.store.fleet_pause import SqlFleetPause

    def work(store: Store) -> FleetPause | None:
        return SqlFleetPause(store.engine).resume()

    was = with_existing_store(config, db, work)
    out.print("the fleet was not paused" if was is None else
              f"resumed the fleet (paused {was.since()}): the next tick changes it again",
              markup=False, highlight=False, soft_wrap=True)
