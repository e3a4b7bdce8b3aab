"""What a backtest table cannot show on its own: why a series has no score, and a horizon the
series' step rounds."""

from __future__ import annotations

from collections import Counter

from forecaster.backtest import SeriesBacktest
from forecaster.metrics import Scores


def unscored_notes(result: SeriesBacktest, horizon_s: int, product: Scores) -> list[str]:
    """One line per reason a reader of the table would otherwise have to guess (also why a
    series of zeros is forecast 0: its WAPE is 0 / 0, shown as ``-``)."""
    notes = []
    scored_pairs = product.pairs
    step_s = result.history.step_s
    lead_s = result.n_targets * step_s
    if horizon_s % step_s:
        notes.append(f"--horizon {horizon_s} s is not a whole number of this series' steps "
                     f"({step_s} s): the headline lead is {lead_s} s")
    if scored_pairs == 0:
        if result.origins.size == 0:
            notes.append("no origin in the test part (the series is too short for "
                         "--test-fraction): nothing scored")
        else:
            notes.append(f"none of the {result.origins.size} origin(s) has an actual "
                         f"{lead_s} s after its last observation (the horizon runs past the "
                         "data, or those targets are missing): nothing scored")
    if scored_pairs and product.wape is None:
        reasons = Counter(x for x in result.predictions.reason if x)
        fallbacks = ", ".join(f"{k} x{n}" for k, n in reasons.items()) or "none"
        notes.append(f"all {scored_pairs} scored actual(s) at the headline lead are 0: WAPE is "
                     f"undefined; fallbacks: {fallbacks}")
    return notes
