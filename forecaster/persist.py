"""Fitted state as JSON (versioned), so a one-shot job process reuses yesterday's work.

A state file holds, for one series, the level model fitted at its current anchor (coefficients
per lead, p90 calibration, the method/fallback chosen, the seasonal curve) or the boosted model
(its bag of trees per lead as arrays, ``forecaster.trees``), and the latest Prophet
fit (curve + warm-start parameters). On load, an entry is used only when its anchor is the one
the forecaster needs *and* the data before that anchor is unchanged (same fingerprint);
otherwise the forecaster refits, warm-starting Prophet from the stored parameters.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from forecaster.boosted import BoostedFit
from forecaster.features import History
from forecaster.models import AnchoredForecaster, LinearFit, fingerprint
from forecaster.seasonal import SeasonalCurve
from forecaster.trees import Bag

STATE_VERSION = 1


def state_path(state_dir: Path, series_id: str, method: str) -> Path:
    return state_dir / f"{state_stem(series_id)}.{method}.json"


def state_stem(series_id: str) -> str:
    """The part of a state file's name that names the series: its id made safe for a file name
    (at most 100 characters) and the crc32 of the id in 8 hex digits (as ``Shard.owns``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", series_id)[:100]
    return f"{safe}.{abs(hash_id(series_id)):08x}"


def hash_id(text: str) -> int:
    return zlib.crc32(text.encode())


def export_state(model: object, h: History, origin: int, leads: tuple[int, ...]) -> dict[str, Any]:
    """The entries ``model`` used for a forecast at ``origin`` (empty dict when none)."""
    doc: dict[str, Any] = {"version": STATE_VERSION, "series_id": h.series_id,
                           "step_s": h.step_s}
    if not isinstance(model, AnchoredForecaster):
        return doc
    anchor = model.anchor_for(h, origin)
    hit = model.get_entry(model.entry_key(h, anchor, leads))
    fit = hit[0] if hit is not None else None
    if hit is not None and isinstance(fit, BoostedFit):
        doc["boosted"] = {"anchor_s": anchor, "fingerprint": fingerprint(h, anchor),
                          "leads": list(leads),
                          "trees": {str(k): v.to_json() for k, v in fit.models.items()},
                          "method": fit.method, "reason": fit.reason,
                          "backtest_wape": _num(fit.backtest_wape),
                          "zeros_as_gaps": fit.zeros_as_gaps,
                          "hourly": fit.hourly,
                          "q90": {str(k): v for k, v in hit[1].items()}}
    if hit is not None and isinstance(fit, LinearFit):
        q90 = hit[1]
        doc["level"] = {"anchor_s": anchor, "fingerprint": fingerprint(h, anchor),
                        "leads": list(leads), "coefs": {str(k): v.tolist()
                                                        for k, v in fit.coefs.items()},
                        "curve": fit.curve.to_json() if fit.curve else None,
                        "method": fit.method, "reason": fit.reason,
                        "backtest_wape": _num(fit.backtest_wape),
                        "q90": {str(k): v for k, v in q90.items()}}
    seasonal = getattr(model, "seasonal", None)
    if seasonal is not None and hasattr(seasonal, "seasonal_anchor"):
        day = seasonal.seasonal_anchor(h.series_id, anchor)
        fit_s = seasonal.cached(h, day)
        if fit_s is not None:
            doc["seasonal"] = {"anchor_s": day, "fingerprint": fingerprint(h, day),
                               "curve": fit_s.curve.to_json(), "params": fit_s.params}
    return doc


def import_state(model: object, h: History, doc: dict[str, Any]) -> int:
    """Load matching entries into ``model``'s caches; returns how many were usable. A doc of
    this version and series whose entries are malformed (wrong types, missing keys, an integer
    too large for a float) raises (KeyError, TypeError, ValueError, OverflowError, ...) before
    anything is loaded."""
    if (doc.get("version") != STATE_VERSION or doc.get("series_id") != h.series_id
            or doc.get("step_s") != h.step_s or not isinstance(model, AnchoredForecaster)):
        return 0
    loads: list[Callable[[], None]] = []
    level = doc.get("level")
    if isinstance(level, dict) and fingerprint(h, level["anchor_s"]) == level["fingerprint"]:
        leads = tuple(int(k) for k in level["leads"])
        curve = SeasonalCurve.from_json(level["curve"]) if level.get("curve") else None
        fit = LinearFit({int(k): np.asarray(v, dtype=np.float64)
                         for k, v in level["coefs"].items()}, curve, level["method"],
                        level["reason"], _float(level.get("backtest_wape")))
        q90 = {int(k): float(v) for k, v in level["q90"].items()}
        loads.append(partial(model.put_entry, model.entry_key(h, float(level["anchor_s"]), leads),
                             fit, q90))
    boosted = doc.get("boosted")
    if isinstance(boosted, dict) and fingerprint(h, boosted["anchor_s"]) == boosted["fingerprint"]:
        leads = tuple(int(k) for k in boosted["leads"])
        q90 = {int(k): float(v) for k, v in boosted["q90"].items()}
        b_fit = BoostedFit({int(k): Bag.from_json(v) for k, v in boosted["trees"].items()},
                           q90, boosted["method"], boosted["reason"],
                           _float(boosted.get("backtest_wape")),
                           zeros_as_gaps=bool(boosted.get("zeros_as_gaps", False)),
                           hourly=bool(boosted.get("hourly", False)))
        loads.append(partial(model.put_entry,
                             model.entry_key(h, float(boosted["anchor_s"]), leads), b_fit, q90))
    seasonal = getattr(model, "seasonal", None)
    season = doc.get("seasonal")
    if seasonal is not None and isinstance(season, dict) and hasattr(seasonal, "restore") \
            and fingerprint(h, season["anchor_s"]) == season["fingerprint"]:
        loads.append(partial(seasonal.restore, h, float(season["anchor_s"]),
                             SeasonalCurve.from_json(season["curve"]), season["params"]))
    for load in loads:
        load()
    return len(loads)


def holds_state(path: Path, series_id: str) -> bool:
    """Whether ``path`` is a state file of this version for ``series_id``, from its first
    bytes only (cheap enough to ask for every model of a fleet before any is forecast): they
    are those ``save_state`` writes for ``export_state``'s doc, its version and series id
    first. A file that begins so but is otherwise broken is found out by ``load_state`` /
    ``import_state`` and refitted. A FIFO or a directory is not a state file (not opened)."""
    head = f'{{"version": {STATE_VERSION}, "series_id": {json.dumps(series_id)}, '.encode()
    try:
        if not path.is_file():
            return False
        with path.open("rb") as handle:
            return handle.read(len(head)) == head
    except OSError:
        return False


def load_state(path: Path) -> dict[str, Any]:
    """The state doc of ``path``; {} (refit) when it is missing, unreadable or not JSON as
    ``save_state`` writes it (it never writes NaN or Infinity, nor a number such as 1e400 that
    reads as infinite, nor lists nested so deep that reading them raises RecursionError)."""
    try:
        doc = json.loads(path.read_text(), parse_constant=_no_constant, parse_float=_finite)
    except (OSError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def save_state(path: Path, doc: dict[str, Any]) -> None:
    """Write atomically (temp file + rename), so a killed job never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, allow_nan=False)  # ValueError on NaN/Infinity, before any write
    # a name no other writer has: two pods of one shard (a Job retry overlapping its first
    # try) can share a PID in their own PID namespaces
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o644)  # as a plain write would (mkstemp makes it 0600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk: no partial temp file left behind
        raise


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} in a state file")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} in a state file")
    return value


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) else float("nan")
