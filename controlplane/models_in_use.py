"""The models ``headroom serve --backend kubernetes`` manages, reloaded from the models table
without a restart: ``headroom models import`` / ``models remove`` take effect at the next tick.

``models_change`` is the decision (pure but for ``reconcile_config``'s state-dir check): the new
set's reconcile config, rebuilt with every check ``serve`` runs at start, or, when a check
refuses it, the old set and config kept whole and the reason. ``ModelsInUse`` is the one holder
every consumer reads (the leader's tick, the forecast refresh, Prometheus' per-replica
throughput, KEDA's targets), so all of them see the same set."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Engine

from controlplane.adapters.prometheus import per_replica_rps, unmatched_model_queries
from controlplane.domain.errors import error_line
from controlplane.domain.models import ModelSpec
from controlplane.reconcile import ReconcileConfig
from controlplane.reconcile_config import reconcile_config
from controlplane.settings import ConfigError, Settings
from controlplane.store.model_digest import model_specs_unless
from controlplane.store.outage import STORE_DOWN

log = logging.getLogger("headroom.models")


@dataclass(frozen=True, slots=True)
class InUse:
    """A models set and the reconcile config built from it."""

    specs: tuple[ModelSpec, ...]
    config: ReconcileConfig


@dataclass(frozen=True, slots=True)
class ModelsChange:
    """What a new models set makes of the one in use: ``in_use`` from now on (the old one when
    ``refused`` says why the new one cannot be used, or when nothing changed), and the models
    the new set adds, removes and changes (by name)."""

    in_use: InUse
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    refused: str = ""

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def models_change(settings: Settings, old: InUse, new_specs: tuple[ModelSpec, ...]
                  ) -> ModelsChange:
    """``new_specs`` against ``old``: rebuilt with ``reconcile_config`` (``check_models_table``:
    no model, or a budget or static peak naming a tenant or model the new set lacks, refuses
    it), or ``old`` kept whole with why."""
    before = {s.name: s for s in old.specs}
    after = {s.name: s for s in new_specs}
    added = tuple(sorted(set(after) - set(before)))
    removed = tuple(sorted(set(before) - set(after)))
    changed = tuple(sorted(n for n in set(before) & set(after) if before[n] != after[n]))
    if not (added or removed or changed):
        return ModelsChange(old)
    try:
        config = reconcile_config(settings, new_specs)  # check_models_table first
    except (ConfigError, ValueError) as error:
        return ModelsChange(old, added, removed, changed, refused=str(error))
    return ModelsChange(InUse(new_specs, config), added, removed, changed)


class ModelsInUse:
    """The current models and their reconcile config, reloaded by ``reload_if_changed`` (one
    query: the models table's digest) when the models table changed. A refused set is logged
    once and tried again at the table's next change; a store that is down keeps the set."""

    def __init__(self, settings: Settings, engine: Engine, digest: str,
                 specs: tuple[ModelSpec, ...]) -> None:
        """``specs`` as read with ``digest`` at start; ConfigError when its config is refused."""
        self._settings = settings
        self._engine = engine
        self._digest = digest
        self._lock = threading.Lock()
        self._in_use = InUse(specs, reconcile_config(settings, specs))

    @property
    def specs(self) -> tuple[ModelSpec, ...]:
        return self._in_use.specs

    @property
    def config(self) -> ReconcileConfig:
        return self._in_use.config

    def names(self) -> list[str]:
        return [s.name for s in self._in_use.specs]

    def replica_rps(self) -> Mapping[str, float]:
        return per_replica_rps(self._in_use.specs)

    def engines(self) -> Mapping[str, str]:
        """Each model's engine (``prometheus.by_engine`` reads it by that engine's preset)."""
        return {s.name: s.engine.value for s in self._in_use.specs}

    def reload_if_changed(self) -> ModelsChange | None:
        """Use the models table's set if it changed since the last read (None: it did not, or
        the store could not be read)."""
        with self._lock:
            try:
                digest, specs = model_specs_unless(self._engine, self._digest)
            except STORE_DOWN as error:
                log.warning("models.unread", extra={"error": error_line(error),
                                                    "next": "the models in use stay; the next "
                                                            "tick reads them again"})
                return None
            if specs is None:
                return None
            self._digest = digest  # a refused set is tried again at the next change only
            change = models_change(self._settings, self._in_use, specs)
            self._in_use = change.in_use
        _log(change, unmatched_model_queries(self._settings.prometheus,
                                             (s.name for s in change.in_use.specs)))
        return change


def _log(change: ModelsChange, unmatched: list[str]) -> None:
    """One line for the change; and, when it took effect, one warning naming the
    ``prometheus.model_queries`` entries the models in use do not list (``serve`` checks them
    at start too)."""
    named = {"added": list(change.added), "removed": list(change.removed),
             "changed": list(change.changed)}
    if change.refused:
        log.error("models.reload_refused", extra={
            "error": change.refused, **named,
            "next": "the models in use stay; the models table's next change is tried"})
        return
    if change.any:
        log.info("models.reloaded", extra={**named, "models": len(change.in_use.specs)})
        if unmatched:
            log.warning("models.query_unmatched", extra={
                "models": unmatched, "setting": "prometheus.model_queries",
                "next": "its query applies once a model of that name is imported"})
