"""``forecast.method`` checked before a command starts, the error naming where it was set.

A method given on the command line is the option's error (``--method 'x'``); one from the
settings is the setting's: ``forecast.method`` and the environment variable or config file that
set it, as an operator fixing it needs to know which (``headroom forecast run -c F`` blamed a
``--method`` that was never passed)."""

from __future__ import annotations

import os
from pathlib import Path

from controlplane.settings import ConfigError, Settings
from controlplane.settings_env import env_variable_of
from forecaster.registry import METHODS


def check_forecast_method(settings: Settings, config: Path | None) -> None:
    """Fail before starting anything when ``forecast.method`` names no registered forecaster
    (the forecast job would otherwise die on its first refresh)."""
    method = settings.forecast.method
    if method in METHODS:
        return
    origin = (env_variable_of(("forecast", "method"), os.environ)
              or (str(config) if config is not None else "configuration"))
    raise ConfigError(f"{origin}: forecast.method: unknown forecast method {method!r}; choose "
                      f"one of {', '.join(METHODS)}")
