"""What a timeline's minutes cost: each minute's GPUs billed of each product, counted once a
minute and product however many models run on it, at the product's price per GPU-hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.simulation.engine import MinuteRow
from controlplane.simulation.timeline import billed_cost_usd

AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def _row(minute: int, model: str, product: str, product_gpus: float) -> MinuteRow:
    return MinuteRow(AT + timedelta(minutes=minute), model, 10.0, 1, 0, 10.0, 1.0, 0.0,
                     product, product_gpus)


def test_each_minutes_product_gpus_are_billed_once_at_the_products_price() -> None:
    rows = [_row(0, "chat", "H100-80GB", 8), _row(0, "code", "H100-80GB", 8),
            _row(0, "embed", "L4", 4), _row(1, "chat", "H100-80GB", 16)]
    # minute 0: 8 H100 x $6 + 4 L4 x $1.5; minute 1: 16 H100 x $6; an hour is 60 minutes
    assert billed_cost_usd(rows, {"H100-80GB": 6.0, "L4": 1.5}) == pytest.approx(
        (8 * 6.0 + 4 * 1.5 + 16 * 6.0) / 60)


def test_a_product_without_a_price_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="no price per GPU-hour of L4"):
        billed_cost_usd([_row(0, "embed", "L4", 4)], {"H100-80GB": 6.0})
