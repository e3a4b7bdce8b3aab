"""The only module that imports Prophet (import-linter enforces it).

``fit_prophet`` fits daily (+ weekly with two weeks of data) seasonality and a linear trend with
``uncertainty_samples=0`` (quantiles come from recent residuals, ``forecaster.calibrate``, not
from slow posterior sampling), warm-started from the previous fit's parameters when they fit the
new model's shape (Prophet's documented warm-start recipe). ``forecaster.seasonal_chain`` decides
when to fit; ``ProphetForecaster`` is plain Prophet, kept as the comparison method.
cmdstanpy's logging is silenced here.
"""

from __future__ import annotations

import logging
import tempfile
from collections import OrderedDict
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.features import History
from forecaster.models import AnchoredForecaster, Fitted, baseline_fit
from forecaster.seasonal import SeasonalCurve
from forecaster.seasonal_chain import Params, SeasonalChain, SeasonalFit
from forecaster.settings import DEFAULT_SETTINGS, ForecasterSettings
from forecaster.stacking import SeasonalFitError

for _name in ("cmdstanpy", "prophet", "prophet.plot", "prophet.models"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)
    logging.getLogger(_name).propagate = False

from prophet import Prophet  # noqa: E402  (after silencing its import-time logging)
from prophet.models import CmdStanPyBackend  # noqa: E402
from stanio.json import dump_stan_json  # noqa: E402

logging.getLogger("cmdstanpy").disabled = True

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
DAILY_ORDER, WEEKLY_ORDER = 4, 3  # Prophet's defaults


def fit_prophet(frame: pd.DataFrame, anchor_s: float, init: Params | None) -> SeasonalFit:
    span_days = (frame["ds"].iloc[-1] - frame["ds"].iloc[0]).total_seconds() / 86_400
    if span_days < 2:
        raise ValueError("less than two days of data")
    changepoints = min(25, max(1, len(frame) // 20))
    model = _Prophet(growth="linear", yearly_seasonality=False,
                    daily_seasonality=DAILY_ORDER, weekly_seasonality=(
                        WEEKLY_ORDER if span_days >= 14 else False),
                    uncertainty_samples=0, n_changepoints=changepoints)
    kwargs: dict[str, Any] = {"seed": 0}
    weekly = span_days >= 14
    if init is not None and _compatible(init, weekly, changepoints):
        kwargs["init"] = {k: (np.asarray(v, dtype=float) if isinstance(v, list) else v)
                          for k, v in init.items()}
    model.fit(frame, **kwargs)
    terms = tuple((float(p["period"]), int(p["fourier_order"]))
                  for p in model.seasonalities.values())
    beta = tuple(float(b) for b in np.ravel(model.params["beta"][0]))
    curve = SeasonalCurve(terms=terms, beta=beta, y_scale=float(model.y_scale or 1.0))
    return SeasonalFit(anchor_s, model, curve, warm_start_params(model))


class _Backend(CmdStanPyBackend):
    """Prophet's CmdStanPy backend (the same optimizer calls, Newton fallback included) with
    the data and inits JSON written in one C-encoded ``json.dumps`` of numpy arrays, not number
    by number through Python lists and the pure-Python incremental encoder: the same text
    reaches CmdStan (``stanio.json.write_stan_json`` produces it too), ~10 ms less per fit."""

    def fit(self, stan_init: dict[str, Any], stan_data: dict[str, Any],
            **kwargs: Any) -> OrderedDict[str, FloatArray]:
        if "inits" not in kwargs and "init" in kwargs:
            stan_init = self.sanitize_custom_inits(stan_init, kwargs.pop("init"))
        init_doc = {"k": stan_init["k"], "m": stan_init["m"],
                    "sigma_obs": stan_init["sigma_obs"],
                    "delta": np.asarray(stan_init["delta"]), "beta": np.asarray(stan_init["beta"])}
        data_doc = {name: stan_data[name] for name in ("T", "S", "K", "tau", "trend_indicator",
                                                       "sigmas")}
        for name in ("y", "t", "cap", "t_change", "s_a", "s_m", "X"):
            data_doc[name] = np.asarray(stan_data[name])
        with tempfile.TemporaryDirectory(prefix="headroom-prophet-") as tmp:
            data_path, init_path = Path(tmp) / "data.json", Path(tmp) / "init.json"
            data_path.write_text(dump_stan_json(data_doc))
            init_path.write_text(dump_stan_json(init_doc))
            args: dict[str, Any] = {"data": str(data_path), "inits": str(init_path),
                                    "iter": int(1e4),
                                    "algorithm": "Newton" if int(data_doc["T"]) < 100
                                    else "LBFGS"}
            args.update(kwargs)
            try:
                self.stan_fit = self.model.optimize(**args)
            except RuntimeError:
                if not self.newton_fallback or args["algorithm"] == "Newton":
                    raise
                args["algorithm"] = "Newton"
                self.stan_fit = self.model.optimize(**args)
        params = self.stan_to_dict_numpy(self.stan_fit.column_names,
                                         self.stan_fit.optimized_params_np)
        return OrderedDict((name, value.reshape((1, -1))) for name, value in params.items())


#: (feature columns, modes) -> Prophet's component indicator matrix and the completed modes:
#: the same for every fit with the same seasonalities (a pandas crosstab, ~10 ms, per fit)
_COMPONENTS: dict[tuple[object, ...], tuple[pd.DataFrame, Any]] = {}


class _Prophet(Prophet):
    """Prophet with the backend above and its component matrix memoised (same numbers)."""

    def _load_stan_backend(self, stan_backend: str | None) -> None:
        self.stan_backend = _Backend()

    def regressor_column_matrix(self, seasonal_features: pd.DataFrame,
                                modes: Any) -> tuple[pd.DataFrame, Any]:
        if (self.train_component_cols is not None or self.extra_regressors
                or self.train_holiday_names is not None):
            return super().regressor_column_matrix(seasonal_features, modes)
        key = (tuple(seasonal_features.columns), self.holidays_mode,
               *(tuple(modes[m]) for m in sorted(modes)))
        hit = _COMPONENTS.get(key)
        if hit is None:
            hit = super().regressor_column_matrix(seasonal_features, deepcopy(modes))
            _COMPONENTS[key] = hit
        return hit[0].copy(), deepcopy(hit[1])


def warm_start_params(model: Any) -> Params:
    """Parameters of a fit, as Prophet's warm-start recipe passes them to the next fit."""
    out: Params = {}
    for name in ("k", "m", "sigma_obs"):
        out[name] = float(np.ravel(model.params[name])[0])
    for name in ("delta", "beta"):
        out[name] = np.ravel(model.params[name][0]).astype(float).tolist()
    return out


def _compatible(init: Params, weekly: bool, changepoints: int) -> bool:
    beta = 2 * (DAILY_ORDER + (WEEKLY_ORDER if weekly else 0))
    return len(init.get("beta", [])) == beta and len(init.get("delta", [])) == changepoints


class ProphetForecaster(AnchoredForecaster):
    """Plain Prophet (trend + seasonality, no recent-level correction): the comparison method."""

    name = "prophet"

    def __init__(self, settings: ForecasterSettings = DEFAULT_SETTINGS) -> None:
        super().__init__(settings)
        self.chain = SeasonalChain(settings)

    def period_s(self) -> int:
        return self.settings.seasonal_period_s

    def fit(self, h: History, anchor_s: float, leads: tuple[int, ...]) -> Fitted:
        try:
            fit = self.chain.fit_at(h, anchor_s)
        except SeasonalFitError:
            return baseline_fit("last", leads, "persistence", "short_history")
        if fit.model is None:  # restored state carries no trend: refit not possible here
            return baseline_fit("last", leads, "persistence", "seasonal_fit_failed")
        return _ProphetPoint(fit)


@dataclass(slots=True)
class _ProphetPoint(Fitted):
    fit: SeasonalFit
    method: str = "prophet"
    reason: str = ""
    backtest_wape: float = float("nan")

    def point(self, h: History, origins: IntArray, lead: int) -> FloatArray:
        times = np.floor(h.time_of(origins - 1 + lead)).astype(np.int64)
        frame = pd.DataFrame({"ds": pd.to_datetime(times, unit="s")})
        return np.asarray(self.fit.model.predict(frame)["yhat"].to_numpy(), dtype=np.float64)
