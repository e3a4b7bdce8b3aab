"""What ``headroom demo`` and ``serve --backend sim`` refuse before they write anything.

A simulated fleet writes its models (a new store's), prices, synthetic history, ticks and the
store's ``sim-fleet`` lease into its store. A start it would refuse is refused before the first of
those writes (the lease included): from the settings alone (``check_sim_models``) or from what
the store lists, read without writing (``check_sim_store``); a real fleet's store stays as it
was, row for row. ``SimRuntime.open`` checks the store again (a models import meanwhile).
``headroom models import`` into a simulated fleet's store refuses the models such a start would
refuse (``check_import_into_sim_store``)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping

from controlplane.domain.models import ModelSpec
from controlplane.settings import ConfigError, Settings
from controlplane.sim.catalog import DEMO_MODELS, not_demo_models
from controlplane.store import StoreUnavailable
from controlplane.store.configured import listed_model_names
from controlplane.store.engine import redact, sqlite_file
from forecaster.errors import InputError


def check_sim_models(factors: Mapping[str, float], specs: tuple[ModelSpec, ...]) -> None:
    """A true throughput factor for a model the simulated fleet does not run would never
    apply: most likely a misspelt name."""
    unknown = sorted(set(factors) - {s.name for s in specs})
    if unknown:
        raise ConfigError(f"sim.true_throughput_factor: no model {', '.join(map(repr, unknown))} "
                          f"in the simulated fleet ({', '.join(s.name for s in specs)})")


def check_not_a_real_fleet(shown_url: str, listed: Iterable[str]) -> None:
    """StoreUnavailable when ``listed`` (the store's models) names a model the simulated fleet
    does not run: a real fleet's store (``headroom models import``), or a demo's store a model
    was imported into (``remove_commands`` says how to take them out)."""
    foreign = not_demo_models(listed)
    if foreign:
        raise StoreUnavailable(
            f"store {shown_url} lists models the simulated fleet does not run "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}): a real "
            "fleet's store (`headroom models import`). `headroom demo` and `serve` with "
            "`backend: sim` write the demo's models, traffic and ticks into their store: "
            "give them one of their own (--db, or db.url), or, if this one is a demo's, "
            f"remove those models from it: {remove_commands(shown_url, foreign)}")


def check_import_into_sim_store(shown_url: str, source: str, names: Iterable[str]) -> None:
    """InputError when a models file (``source``, its model ``names``) imported into a
    simulated fleet's store lists a model the simulated fleet does not run: the fleet's next
    start would refuse the store (``check_not_a_real_fleet``), so nothing is imported."""
    foreign = not_demo_models(names)
    if foreign:
        raise InputError(
            f"{source} lists models the simulated fleet does not run ({', '.join(foreign)}) "
            f"and store {shown_url} is a simulated fleet's (`headroom demo`, `serve --backend "
            "sim`), whose next start would refuse a store listing them: nothing imported. "
            "Import them into a real fleet's store (--db, or db.url), or leave them out of "
            f"{source} (the demo's models: {', '.join(s.name for s in DEMO_MODELS)})")


def remove_commands(shown_url: str, names: list[str]) -> str:
    """The ``headroom models remove`` that takes each of ``names`` out of the store at
    ``shown_url`` (named by ``--db`` for a SQLite file, else by the same db.url); past three
    names, one for all of them."""
    store_file = sqlite_file(shown_url)
    store = f" --db {shlex.quote(str(store_file))}" if store_file is not None else ""
    same = "" if store_file is not None else " (with the same db.url)"
    if len(names) > 3:
        return f"`headroom models remove NAME{store}` for each{same}"
    return ", ".join(f"`headroom models remove {shlex.quote(name)}{store}`"
                     for name in names) + same


def check_sim_store(settings: Settings) -> None:
    """Everything a simulated fleet's start on ``settings.db.url`` refuses, checked by reading
    only (no file, directory, schema, lease or row made): ConfigError or StoreUnavailable."""
    check_sim_models(settings.sim.true_throughput_factor, DEMO_MODELS)
    check_not_a_real_fleet(redact(settings.db.url), listed_model_names(settings.db))
