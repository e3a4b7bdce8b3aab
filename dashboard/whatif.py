"""What-if: read ``headroom simulate`` timelines and compare policies' dollars against short
minutes. Definitions match ``../shared/bench/sim_score.py``: a model-minute is short when
ready_replicas x per_replica_rps < demand_rps; a minute is short when any model is; GPU-hours are
gpus_billed per minute / 60 (taken once per minute when every row of a minute carries the same
fleet-wide value, else summed over models). A timeline with the ``gpu_product`` and
``product_gpus_billed`` columns (``headroom simulate`` writes them) prices each product's GPU-hours
at its own price, as the run's cost_usd does; an older one without them prices all its GPU-hours at
one price. A price is the store's configured price of the product when it has one, else the list
price (``price_for``)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from controlplane.domain.cost import GpuPrice, PriceTable

REQUIRED = ("minute", "model", "demand_rps", "ready_replicas", "per_replica_rps", "gpus_billed")
NUMERIC = REQUIRED[2:]
#: optional: the model's GPU product and the GPUs that product billed in the minute
PRODUCT_COLUMNS = ("gpu_product", "product_gpus_billed")
#: added to a timeline whose minutes were timestamps: the minute as a UTC time
MINUTE_AT = "minute_at"
EPS = 1e-9


class TimelineError(ValueError):
    """A timeline that cannot be read; the message names the file, line or column."""


def _bad_line(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0]) + 2  # 1-based, after the header


def read_timelines(data: bytes, name: str) -> dict[str, pd.DataFrame]:
    """Parse and validate one CSV; a ``policy`` column splits it into one timeline per policy,
    otherwise the file name (without extension) labels it."""
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype={"model": str, "gpu_product": str},
                            keep_default_na=False, na_values=[""])
    except (ValueError, UnicodeDecodeError) as error:
        raise TimelineError(f"{name}: not a CSV file ({error})") from None
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise TimelineError(f"{name}: missing column(s) {', '.join(missing)}; expected "
                            f"{','.join(REQUIRED)}[,gpu_per_replica]")
    if frame.empty:
        raise TimelineError(f"{name}: no rows")
    given = [c for c in PRODUCT_COLUMNS if c in frame.columns]
    if given and len(given) < len(PRODUCT_COLUMNS):
        (lone,) = given
        raise TimelineError(f"{name}: column {lone} without "
                            f"{next(c for c in PRODUCT_COLUMNS if c != lone)}; the two go together")
    for column in [*NUMERIC, *(PRODUCT_COLUMNS[1:] if given else ())]:
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            line = _bad_line(bad)
            raise TimelineError(f"{name}: line {line}: {column} must be a finite number >= 0, "
                                f"got {frame[column].iloc[line - 2]!r}")
        frame[column] = values
    empty = (frame["model"].isna() | (frame["model"].astype(str).str.strip() == "")).to_numpy()
    if empty.any():
        raise TimelineError(f"{name}: line {_bad_line(empty)}: empty model")
    if given:
        unpriced = (frame["gpu_product"].isna()
                    | (frame["gpu_product"].astype(str).str.strip() == "")).to_numpy()
        if unpriced.any():
            raise TimelineError(f"{name}: line {_bad_line(unpriced)}: empty gpu_product")
    frame["minute"], timed = _minutes(frame["minute"], name)
    if timed:  # the chart's axis shows the times the file gave, not minutes since 1970
        frame[MINUTE_AT] = pd.to_datetime(frame["minute"] * 60, unit="s", utc=True)
    label = Path(name).stem
    if "policy" in frame.columns:
        unlabelled = (frame["policy"].isna()
                      | (frame["policy"].astype(str).str.strip() == "")).to_numpy()
        if unlabelled.any():
            raise TimelineError(f"{name}: line {_bad_line(unlabelled)}: empty policy")
        return {str(p): _checked(g.drop(columns="policy"), f"{name} (policy {p})")
                for p, g in frame.groupby("policy", sort=False)}
    return {label: _checked(frame, name)}


def _minutes(column: pd.Series, name: str) -> tuple[pd.Series, bool]:
    """Whole minutes of the ``minute`` column (timestamps as minutes since the epoch), and
    whether they were timestamps."""
    numeric = pd.to_numeric(column, errors="coerce")
    if numeric.notna().all():
        fractional = (numeric != numeric.round()).to_numpy()
        if fractional.any():
            raise TimelineError(f"{name}: line {_bad_line(fractional)}: minute "
                                f"{column.iloc[_bad_line(fractional) - 2]!r} is not whole")
        return numeric.astype(np.int64), False
    try:
        stamps = pd.to_datetime(column, utc=True, format="mixed")
    except (ValueError, TypeError):
        raise TimelineError(f"{name}: column minute is neither whole numbers nor "
                            "timestamps") from None
    return (stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(minutes=1), True


def _checked(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    duplicated = frame.duplicated(["minute", "model"]).to_numpy()
    if duplicated.any():
        raise TimelineError(f"{name}: line {_bad_line(duplicated)}: a second row for the same "
                            "minute and model")
    return frame.sort_values(["minute", "model"]).reset_index(drop=True)


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    label: str
    minutes: int
    model_minutes: int
    short_model_minutes: int
    short_minutes: int
    demand_requests: float
    shortfall_requests: float
    gpu_hours: float
    usd: float
    billing: str  # "fleet" or "per-model"
    #: each product's GPU-hours when the timeline names products (then each is priced at its
    #: own price), else empty (all GPU-hours at one price)
    gpu_hours_by_product: Mapping[str, float]

    @property
    def priced(self) -> str:
        return "per product" if self.gpu_hours_by_product else "one price"

    @property
    def short_model_minutes_pct(self) -> float:
        return 100.0 * self.short_model_minutes / self.model_minutes if self.model_minutes else 0.0


def short_rows(frame: pd.DataFrame) -> pd.Series:
    capacity = frame["ready_replicas"] * frame["per_replica_rps"]
    return capacity < frame["demand_rps"] * (1 - EPS) - EPS


def billed_per_minute(frame: pd.DataFrame) -> tuple[pd.Series, str]:
    """GPUs billed per minute and how the column was read."""
    by_minute = frame.groupby("minute")["gpus_billed"]
    if frame["model"].nunique() < 2 or bool((by_minute.nunique() == 1).all()):
        return by_minute.first(), "fleet"
    return by_minute.sum(), "per-model"


def names_products(frame: pd.DataFrame) -> bool:
    """Whether the timeline has the gpu_product and product_gpus_billed columns."""
    return all(c in frame.columns for c in PRODUCT_COLUMNS)


def products_of(frames: Sequence[pd.DataFrame]) -> list[str]:
    """The GPU products the timelines that name products bill, sorted."""
    return sorted({str(p) for f in frames if names_products(f) for p in f["gpu_product"]})


def gpu_hours_by_product(frame: pd.DataFrame) -> dict[str, float]:
    """Each product's GPU-hours: its product_gpus_billed taken once per minute, / 60; empty
    for a timeline without the product columns."""
    if not names_products(frame):
        return {}
    billed = frame.groupby(["minute", "gpu_product"])["product_gpus_billed"].first()
    with np.errstate(over="ignore", invalid="ignore"):
        return {str(product): float(gpus) / 60.0
                for product, gpus in billed.groupby(level="gpu_product").sum().items()}


def _checked_price(what: str, usd_per_gpu_hour: float) -> None:
    if not math.isfinite(usd_per_gpu_hour) or usd_per_gpu_hour < 0:
        raise TimelineError(f"price: {what} must be >= 0, got {usd_per_gpu_hour!r}")


def summarize(label: str, frame: pd.DataFrame, usd_per_gpu_hour: float,
              usd_per_gpu_hour_by_product: Mapping[str, float] | None = None) -> PolicyOutcome:
    """Short minutes, shortfall, GPU-hours and dollars of one policy. Dollars: each product's
    GPU-hours at its price in ``usd_per_gpu_hour_by_product`` when that is given and the timeline
    names products, else all GPU-hours at ``usd_per_gpu_hour``."""
    _checked_price("usd_per_gpu_hour", usd_per_gpu_hour)
    by_product = gpu_hours_by_product(frame) if usd_per_gpu_hour_by_product is not None else {}
    prices = usd_per_gpu_hour_by_product or {}
    for product in by_product:
        if product not in prices:
            raise TimelineError(f"policy {label}: no price for GPU product {product!r}")
        _checked_price(f"usd_per_gpu_hour of {product}", prices[product])
    short = short_rows(frame)
    capacity = frame["ready_replicas"] * frame["per_replica_rps"]
    deficit = (frame["demand_rps"] - capacity).clip(lower=0).where(short, 0.0)
    billed, billing = billed_per_minute(frame)
    with np.errstate(over="ignore", invalid="ignore"):
        gpu_hours = float(billed.sum()) / 60.0
        dollars = (sum(hours * prices[p] for p, hours in by_product.items()) if by_product
                   else gpu_hours * usd_per_gpu_hour)
        totals = {"GPU-hours": gpu_hours, "dollars": dollars,
                  "demand": float(frame["demand_rps"].sum()) * 60.0,
                  "shortfall": float(deficit.sum()) * 60.0}
    overflowed = [what for what, value in totals.items() if not math.isfinite(value)]
    if overflowed:
        raise TimelineError(f"policy {label}: {', '.join(overflowed)} too large to add up; the "
                            "timeline's values (or the price) are out of range")
    return PolicyOutcome(
        label=label, minutes=int(frame["minute"].nunique()), model_minutes=len(frame),
        short_model_minutes=int(short.sum()),
        short_minutes=int(short.groupby(frame["minute"]).any().sum()),
        demand_requests=totals["demand"], shortfall_requests=totals["shortfall"],
        gpu_hours=gpu_hours, usd=totals["dollars"], billing=billing,
        gpu_hours_by_product=by_product)


def minute_series(label: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Per minute: GPUs billed and models short, for the policy comparison chart (with
    ``MINUTE_AT`` when the timeline's minutes were timestamps)."""
    billed, _ = billed_per_minute(frame)
    shorts = short_rows(frame).groupby(frame["minute"]).sum()
    series = pd.DataFrame({"policy": label, "minute": billed.index, "gpus_billed": billed.values,
                           "models_short": shorts.reindex(billed.index).values})
    if MINUTE_AT in frame.columns:
        series[MINUTE_AT] = pd.to_datetime(series["minute"] * 60, unit="s", utc=True)
    return series


def timed_span(frames: Sequence[pd.DataFrame]) -> tuple[datetime, datetime] | None:
    """[first, last + 1) minute of timelines whose minutes are all UTC times (None: none given,
    or one with minutes that are no times)."""
    if not frames or not all(MINUTE_AT in f.columns for f in frames):
        return None
    first = min(f[MINUTE_AT].min() for f in frames)
    last = max(f[MINUTE_AT].max() for f in frames)
    return first.to_pydatetime(), (last + pd.Timedelta(minutes=1)).to_pydatetime()


@dataclass(frozen=True, slots=True)
class ChosenPrice:
    price: GpuPrice
    configured: bool  # from the store's prices table, not the list
    why: str  # where the price comes from, for the page


def price_for(product: str, configured: Sequence[GpuPrice], no_store: str = "") -> ChosenPrice:
    """The store's configured price of ``product`` when it has one, else its list price (or
    OpenCost's default GPU price for a product without one). ``no_store``: why the store's
    prices could not be read (empty when they were)."""
    own = next((p for p in reversed(configured) if p.product == product), None)
    if own is not None:
        return ChosenPrice(own, True, f"The store's configured price for {product} (source: "
                                      f"{own.source}; as of {own.as_of}).")
    listed = PriceTable().price_of(product)
    cause = no_store or f"the store has no configured price for {product}"
    return ChosenPrice(listed, False, f"List price for {product}: {cause} (source: "
                                      f"{listed.source}; as of {listed.as_of}).")


def price_products(configured: Sequence[GpuPrice]) -> list[str]:
    """Products to choose from: the listed ones, then any only the store prices."""
    listed = [p.product for p in PriceTable().prices]
    return [*listed, *sorted({p.product for p in configured} - set(listed))]


def reported_cost_usd(document: object, timelines: Mapping[str, str]) -> dict[str, float]:
    """The cost_usd a ``headroom simulate --json`` document reports, by the page's policy label:
    a policy's summary goes to the timeline the document names for it (the same path, else the
    only one of the same file name), else to the timeline labelled as the policy. ``timelines``:
    the page's label -> the file it came from. Anything else in the document is ignored."""
    if not isinstance(document, dict) or not isinstance(document.get("policies"), dict):
        return {}
    written = document.get("timelines")
    written = written if isinstance(written, dict) else {}
    found: dict[str, float] = {}
    for policy, summary in document["policies"].items():
        cost = summary.get("cost_usd") if isinstance(summary, dict) else None
        if isinstance(cost, bool) or not isinstance(cost, int | float):
            continue
        path = written.get(policy)
        same_path = [label for label, name in timelines.items() if name == path]
        same_name = [label for label, name in timelines.items()
                     if isinstance(path, str) and Path(name).name == Path(path).name]
        label = (same_path[0] if len(same_path) == 1 else same_name[0] if len(same_name) == 1
                 else str(policy) if policy in timelines else None)
        if label is not None:
            found[label] = float(cost)
    return found
