"""``forecast.method`` checked before a command starts, the error naming where it was set.

A method given on the command line is the option's error (``--method 'x'``); one from the
settings is the setting's: ``forecast.method`` and the environment variable or config file that
set it, as an operator fixing it needs to know which (``headroom forecast run -c F`` blamed a
``--method`` that was never passed). A horizon shorter than one step is refused too
(``check_horizon``)."""

from __future__ import annotations

import os
from pathlib import Path

from controlplane.settings import ConfigError, Settings
from controlplane.settings_env import env_variable_of
from forecaster.errors import InputError
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


def check_horizon(horizon_s: int, step_s: int, horizon: str | None, step: str | None) -> None:
    """Refuse a horizon shorter than one step (``--horizon 20`` is 20 s: not a step ahead of a
    60-s series); ``horizon``/``step``: the options as given (None: from the settings)."""
    if horizon_s >= step_s:
        return
    given = f"--horizon {horizon} ({horizon_s} s)" if horizon else f"forecast.horizon_s {horizon_s}"
    of = f"--step {step}" if step else "forecast.step_s"
    raise InputError(f"{given} is shorter than one step ({of}: {step_s} s): give at least "
                     f"--horizon {step_s}s (a number without a unit is seconds)")
