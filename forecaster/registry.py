"""Forecasters by name. Prophet-backed ones are loaded lazily by module name, so importing the
registry (and everything that imports it: the API, the control plane) never imports Prophet;
only ``forecaster.prophet_backend`` does, and only when a Prophet method is first used."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from forecaster.errors import UnknownMethodError
from forecaster.methods import METHODS
from forecaster.models import BASELINE_FEATURES, BaselineForecaster, Forecaster
from forecaster.seasonal_chain import SeasonalChain
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings
from forecaster.stacking import SeasonalBackend, StackingForecaster

PROPHET_MODULE = "forecaster.prophet_backend"

__all__ = ["METHODS", "get_forecaster", "register"]


def _prophet() -> Any:
    return importlib.import_module(PROPHET_MODULE)


def _seasonal(settings: ForecasterSettings) -> SeasonalBackend:
    return SeasonalChain(settings, PROPHET_MODULE)


def _plain_prophet(settings: ForecasterSettings) -> Forecaster:
    model: Forecaster = _prophet().ProphetForecaster(settings)
    return model


def _baseline(name: str) -> Callable[[ForecasterSettings], Forecaster]:
    def make(settings: ForecasterSettings) -> Forecaster:
        return BaselineForecaster(name, BASELINE_FEATURES[name], settings)

    return make


_FACTORIES: dict[str, Callable[[ForecasterSettings], Forecaster]] = {
    "auto": lambda s: StackingForecaster("hybrid", _seasonal(s), guard=True, settings=s),
    "hybrid": lambda s: StackingForecaster("hybrid", _seasonal(s), guard=False, settings=s),
    "level": lambda s: StackingForecaster("level", None, guard=True, settings=s),
    "prophet": _plain_prophet,
    **{name: _baseline(name) for name in BASELINE_FEATURES},
}

_INSTANCES: dict[tuple[str, ForecasterSettings], Forecaster] = {}


def get_forecaster(method: str, settings: ForecasterSettings = DEFAULT_SETTINGS) -> Forecaster:
    """The (process-wide, cached) forecaster for ``method``; its fit cache lives with it."""
    factory = _FACTORIES.get(method)
    if factory is None:
        raise UnknownMethodError(f"unknown forecast method {method!r}; choose one of "
                                 f"{', '.join(METHODS)}")
    key = (method, settings)
    if key not in _INSTANCES:
        _INSTANCES[key] = factory(settings)
    return _INSTANCES[key]


def register(name: str, factory: Callable[[ForecasterSettings], Forecaster],
             description: str) -> None:
    """Add (or replace) a forecaster by name, e.g. a site-specific model."""
    _FACTORIES[name] = factory
    METHODS[name] = description
    for key in [k for k in _INSTANCES if k[0] == name]:
        del _INSTANCES[key]
