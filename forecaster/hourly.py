"""Hourly-phase signal: a change that recurs at the same minute of every hour (pure numpy).

Production traffic can carry an hourly rhythm, e.g. a batch client that sends a burst from :30 to
:50 every hour (ServeGen's m-large grows one in its last five days: the log-change into the :30
step averages +0.18 to +0.36 a day from day 10, against -0.06 to +0.02 on days 1-9). Persistence
then misses every burst. The change from the last observation to the target, seen at the same
phase of the previous hours, predicts it.

The boosted model adds these features only while the rhythm is there: :func:`hourly_signal`
correlates the change to each target with its mean over the same phase of the previous
:data:`SIGNAL_HOURS` hours, on the recent window before the anchor, and switches the features on
when that correlation is significant (:data:`SIGNAL_SE` standard errors, ``1 / sqrt(pairs)``).
On series without the rhythm the model is the one it was before.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from forecaster.features import History, log_seen, row_mean

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: features: the mean same-phase change over the last 6 and the last 12 hours
HOURS_MEAN = (6, 12)
#: the gate correlates against the mean over the last 6 hours
SIGNAL_HOURS = 6
#: on when the correlation is at least this many standard errors (1 / sqrt(pairs)) above zero
SIGNAL_SE = 3.0
MIN_SIGNAL_PAIRS = 48


def hourly_columns(h: History, j: IntArray, t: IntArray, origins: IntArray) -> list[FloatArray]:
    """Mean log-change from the last observation ``j`` to the target ``t`` at the same phase of
    the previous ``HOURS_MEAN`` hours (values before each origin only), and the target's minute
    of the hour."""
    hour = h.steps(3600)
    minute = (h.time_of(t) % 3600) / 60.0
    if hour is None:
        return [np.full(origins.size, np.nan) for _ in HOURS_MEAN] + [minute]
    change = same_phase_changes(h, j, t, origins, hour, max(HOURS_MEAN))
    return [row_mean(change[:, :k]) for k in HOURS_MEAN] + [minute]


def same_phase_changes(h: History, j: IntArray, t: IntArray, origins: IntArray, hour: int,
                       hours: int) -> FloatArray:
    """Column k - 1: log1p(value at t - k hours) - log1p(value at j - k hours), NaN where a
    value is missing or not before the origin."""
    return np.column_stack([log_seen(h, t - k * hour, origins) - log_seen(h, j - k * hour, origins)
                            for k in range(1, hours + 1)])


def hourly_signal(h: History, origins: IntArray, lead: int) -> bool:
    """Whether the change to each target correlates with its same-phase mean over the previous
    ``SIGNAL_HOURS`` hours, over ``origins`` (the recent window before the anchor)."""
    hour = h.steps(3600)
    if hour is None or hour < 2 or origins.size == 0:
        return False
    j = origins - 1
    t = j + lead
    actual = np.log1p(np.maximum(h.at(t), 0.0)) - np.log1p(np.maximum(h.at(j), 0.0))
    seen = row_mean(same_phase_changes(h, j, t, origins, hour, SIGNAL_HOURS))
    ok = np.isfinite(actual) & np.isfinite(seen)
    pairs = int(ok.sum())
    if pairs < MIN_SIGNAL_PAIRS or np.std(actual[ok]) == 0 or np.std(seen[ok]) == 0:
        return False
    corr = float(np.corrcoef(actual[ok], seen[ok])[0, 1])
    return bool(corr >= SIGNAL_SE / np.sqrt(pairs))
