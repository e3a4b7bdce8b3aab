"""``headroom models pause`` / ``resume``: hold a model's replicas (KEDA's
``autoscaling.keda.sh/paused-replicas``) in the store's models table; every reconcile tick reads
the pauses (no restart of serve)."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from controlplane.cli.store_origin import ConfigOption, DbOption, with_existing_store
from controlplane.cli.store_time import now_of
from controlplane.domain.pause import MAX_REPLICAS, ModelPause, PauseSet
from forecaster.errors import InputError

if TYPE_CHECKING:  # imported where used: `headroom models --help` loads no store
    from controlplane.store import Store

out = Console()
NameArgument = Annotated[str, typer.Argument(metavar="NAME",
                                             help="a model of `headroom models list`")]


def operator_name() -> str:
    """The CLI user's login name ("" when it has none): who paused, in the store."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (a container's uid without a passwd entry)
        return ""


def _not_listed(name: str) -> InputError:
    return InputError(f"model {name!r} is not listed (see `headroom models list`)")


def pause(
    name: NameArgument,
    replicas: Annotated[int | None, typer.Option(
        "--replicas", min=0, max=MAX_REPLICAS, metavar="N",
        help="hold NAME at N replicas (scaled to N, then left there); default: at the "
             "replicas it has each tick")] = None,
    config: ConfigOption = None,
    db: DbOption = None,
) -> None:
    """Hold NAME's replicas: no scale action but reaching N (serve reads it at its next tick).

    Its GPUs still count in the node pools and the GPU budgets. A paused model stays paused
    since when it was first paused; --replicas changes the count it holds."""
    from controlplane.store.pauses import SqlModelPauses

    def work(store: Store) -> PauseSet:
        done = SqlModelPauses(store.engine).pause(name, replicas, now_of(store).at, operator_name())
        if done is None:
            raise _not_listed(name)
        return done

    out.print(with_existing_store(config, db, work).line(), markup=False, highlight=False,
              soft_wrap=True)


def resume(name: NameArgument, config: ConfigOption = None, db: DbOption = None) -> None:
    """Let NAME scale again (a model not paused stays as it is)."""
    from controlplane.store.pauses import SqlModelPauses

    def work(store: Store) -> ModelPause | None:
        if name not in store.model_names():
            raise _not_listed(name)
        return SqlModelPauses(store.engine).resume(name)

    was = with_existing_store(config, db, work)
    out.print(f"model {name} was not paused" if was is None else
              f"resumed model {name} ({was.reason()})", markup=False, highlight=False,
              soft_wrap=True)
