"""What ``headroom demo`` and ``serve --backend sim`` refuse before they write anything.

A simulated fleet writes its models (a new store's), prices, synthetic history, ticks and the
store's ``sim-fleet`` lease into its store. A start it would refuse is refused before the first of
those writes (the lease included): from the settings alone (``check_sim_models``) or from what
the store lists, read without writing (``check_sim_store``); a real fleet's store stays as it
was, row for row. ``SimRuntime.open`` checks the store again (a models import meanwhile)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controlplane.domain.models import ModelSpec
from controlplane.settings import ConfigError, Settings
from controlplane.sim.catalog import DEMO_MODELS, not_demo_models
from controlplane.store import StoreUnavailable
from controlplane.store.configured import listed_model_names
from controlplane.store.engine import redact


def check_sim_models(factors: Mapping[str, float], specs: tuple[ModelSpec, ...]) -> None:
    """A true throughput factor for a model the simulated fleet does not run would never
    apply: most likely a misspelt name."""
    unknown = sorted(set(factors) - {s.name for s in specs})
    if unknown:
        raise ConfigError(f"sim.true_throughput_factor: no model {', '.join(map(repr, unknown))} "
                          f"in the simulated fleet ({', '.join(s.name for s in specs)})")


def check_not_a_real_fleet(shown_url: str, listed: Iterable[str]) -> None:
    """StoreUnavailable when ``listed`` (the store's models) names a model the simulated fleet
    does not run: a real fleet's store (``headroom models import``)."""
    foreign = not_demo_models(listed)
    if foreign:
        raise StoreUnavailable(
            f"store {shown_url} lists models the simulated fleet does not run "
            f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}): a real "
            "fleet's store (`headroom models import`). `headroom demo` and `serve` with "
            "`backend: sim` write the demo's models, traffic and ticks into their store: "
            "give them one of their own (--db, or db.url)")


def check_sim_store(settings: Settings) -> None:
    """Everything a simulated fleet's start on ``settings.db.url`` refuses, checked by reading
    only (no file, directory, schema, lease or row made): ConfigError or StoreUnavailable."""
    check_sim_models(settings.sim.true_throughput_factor, DEMO_MODELS)
    check_not_a_real_fleet(redact(settings.db.url), listed_model_names(settings.db))
