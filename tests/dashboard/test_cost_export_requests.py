"""A model served on two GPU products (or, on the day it moved, under two tenants) has one CSV
row per line; its day's requests are split among those rows in proportion to their dollars, so
the Requests column sums to what the model served (no request counted twice) and each row's
CostPer1MRequests is the model's own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane import cost_export
from controlplane.domain.cost import CostAccrual, CostCategory

START = datetime(2026, 3, 2, tzinfo=UTC)
END = START + timedelta(days=1)


def _line(product: str, tenant: str, usd: float) -> CostAccrual:
    return CostAccrual("2026-03-02", START, END, CostCategory.SERVING, product, tenant,
                       "llama", 24.0, usd)


def test_a_models_requests_are_split_across_its_rows_and_sum_to_what_it_served() -> None:
    accruals = (_line("A100-80GB", "acme", 120.0), _line("L4", "acme", 30.0),
                _line("L4", "initech", 50.0))
    rows = cost_export.opencost_rows(accruals, {("2026-03-02", "llama"): 1_000_000.0})
    assert sum(float(r["Requests"]) for r in rows) == pytest.approx(1_000_000.0)
    assert [float(r["Requests"]) for r in rows] == pytest.approx([600_000, 150_000, 250_000])
    # every row: the model's $200 over its 1M requests
    assert {r["CostPer1MRequests"] for r in rows} == {"200.0"}


def test_a_model_with_one_row_a_day_keeps_all_its_requests_there() -> None:
    rows = cost_export.opencost_rows((_line("L4", "acme", 30.0),),
                                     {("2026-03-02", "llama"): 1000.0})
    assert (rows[0]["Requests"], rows[0]["CostPer1MRequests"]) == ("1000.0", "30000.0")


def test_a_model_whose_rows_cost_nothing_splits_its_requests_by_gpu_hours() -> None:
    free = (CostAccrual("2026-03-02", START, END, CostCategory.SERVING, "X", "acme", "llama",
                        6.0, 0.0),
            CostAccrual("2026-03-02", START, END, CostCategory.SERVING, "Y", "acme", "llama",
                        18.0, 0.0))
    rows = cost_export.opencost_rows(free, {("2026-03-02", "llama"): 400.0})
    assert [r["Requests"] for r in rows] == ["100.0", "300.0"]
