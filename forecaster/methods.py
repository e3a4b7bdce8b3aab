"""The forecast methods by name, apart from their implementations (``forecaster.registry``):
the command line's help and checks read them without importing pandas or Prophet."""

from __future__ import annotations

#: name -> one-line description (shown by ``headroom forecast backtest --help``)
METHODS: dict[str, str] = {
    "auto": "hybrid with the per-model guard: falls back to the best naive baseline when it "
            "did worse recently or history is short (the default)",
    "hybrid": "median regression stacking recent-level features and Prophet's daily/weekly "
              "shape; on dense series of 10-minute steps or coarser, a boosted median model of "
              "the log-ratio to the recent level instead (no guard)",
    "level": "the same stacking without Prophet (level and same-time-yesterday features only)",
    "prophet": "plain Prophet (trend + daily/weekly seasonality), for comparison",
    "persistence": "next = last observation",
    "hour_mean": "mean of the last hour",
    "seasonal_naive": "value one day before the target (persistence when unknown)",
}
