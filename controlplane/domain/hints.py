"""Demand hints: a model's demand announced ahead (a launch, a campaign, a batch job) that no
forecast of its history can see. A hint is a floor on the model's forecast over its window; it
never lowers a forecast (pure values; applied by ``controlplane.autoscaling.hints``)."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from controlplane.domain.store_clock import StoreNow
from controlplane.domain.timestamps import utc_text
from scheduler.domain.names import MAX_MODEL_CHARS, name_problem

MAX_HINT_RPS = 1e7
#: what a hint's model adds when the models table does not list it (``headroom models remove
#: --keep-hints``), in ``headroom hint list``, ``headroom status`` and the dashboard: the hint
#: applies again once the model is imported again
NOT_LISTED = " (model not listed)"


def rps_text(rate: float) -> str:
    """A rate as an operator writes it, in digits (1234567, 0.5, 4096), never ``:g``'s exponent
    (1.23457e+06, which also dropped digits); ten significant digits hide float noise."""
    text = format(Decimal(f"{rate:.10g}"), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


@dataclass(frozen=True, slots=True)
class DemandHint:
    """``model`` expects at least ``rate_rps`` from ``start_at`` until ``end_at`` (UTC, end
    excluded); ``reason`` is the operator's words; ``hint_id`` is the store's (None: unsaved)."""

    model: str
    rate_rps: float
    start_at: datetime
    end_at: datetime
    reason: str = ""
    hint_id: int | None = None

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError("demand hint: model is empty")
        if not (math.isfinite(self.rate_rps) and 0 <= self.rate_rps <= MAX_HINT_RPS):
            raise ValueError(f"demand hint for {self.model}: rate_rps must be a number in "
                             f"[0, {MAX_HINT_RPS:g}], got {self.rate_rps}")
        if self.start_at.tzinfo is None or self.end_at.tzinfo is None:
            raise ValueError(f"demand hint for {self.model}: start_at and end_at need a "
                             "time zone")
        if self.end_at <= self.start_at:
            raise ValueError(f"demand hint for {self.model}: end_at {utc_text(self.end_at)} "
                             f"is not after start_at {utc_text(self.start_at)}")

    def overlaps(self, since_at: datetime, until_at: datetime) -> bool:
        """Whether the hint's window meets [since_at, until_at)."""
        return self.start_at < until_at and since_at < self.end_at


MAX_REASON_CHARS = 500


class HintError(ValueError):
    """A hint refused before it is stored: ``field`` names what is wrong (``model``,
    ``rate_rps``, ``window``, ``end``, ``reason``), for each front end to name in its terms."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def new_hint(model: str, rate_rps: float, start_at: datetime, end_at: datetime, reason: str,
             known_models: Collection[str], now: StoreNow,
             listed_models: Collection[str] | None = None) -> DemandHint:
    """A hint to store from what a user gave (``headroom hint add``, the DemandHints gRPC
    service): a model name as the placement API takes one (``scheduler.domain.names``) that
    the store lists, a rate above 0 (a hint of 0 floors nothing; it is also
    what an AddHint that omits rate_rps sends) and at most MAX_HINT_RPS, an end after ``now``
    (by the clock the store's loop runs on, which the error names),
    a reason of at most 500 characters and no NUL, and a valid hint (``DemandHint``);
    HintError names what is not. An unknown model's error lists ``listed_models`` (default:
    every known one; a caller scoped to tenants is shown only theirs)."""
    problem = name_problem(model, MAX_MODEL_CHARS)
    if problem is not None:  # before it is echoed in a message
        raise HintError("model", f"the model name {problem}")
    if not model.strip():  # a store's model imported before models import refused it
        raise HintError("model", f"model {model!r} is empty or only whitespace")
    if model not in known_models:
        listed = known_models if listed_models is None else listed_models
        raise HintError("model", f"model {model!r} is not in the store's models table (known: "
                                 f"{', '.join(sorted(listed)) or 'none'})")
    if len(reason) > MAX_REASON_CHARS:
        raise HintError("reason", f"{len(reason)} characters, at most {MAX_REASON_CHARS}")
    if "\x00" in reason:  # PostgreSQL's text cannot hold it: the insert failed, unnamed
        raise HintError("reason", f"holds a NUL character at {reason.index(chr(0))}; the "
                                  "store's text cannot hold it")
    if not (math.isfinite(rate_rps) and 0 < rate_rps <= MAX_HINT_RPS):  # 0: proto3's omitted
        raise HintError("rate_rps", f"must be a number in (0, {MAX_HINT_RPS:g}], got {rate_rps}")
    if end_at <= now.at:
        raise HintError("end", f"already past (now {now.text()})")
    try:
        return DemandHint(model, rate_rps, start_at, end_at, reason)
    except ValueError as error:
        raise HintError("window", str(error)) from None
