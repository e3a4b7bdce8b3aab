"""A time compared as a literal (a statement compiled with literal_binds) renders as the UTC
instant, and the statement runs and finds the row, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone

from sqlmodel import col, select
from tick_builders import sample_tick_report

from controlplane.store import Store
from controlplane.store.tables import TickRecord


def test_a_time_rendered_as_a_literal_is_the_utc_instant_and_finds_the_row(
        store_url: str) -> None:
    store = Store.open(store_url, migrate=True)
    report = sample_tick_report()
    store.save_tick(report)
    after = report.started_at.astimezone(timezone(timedelta(hours=2))) + timedelta(minutes=1)
    query = select(TickRecord.id).where(col(TickRecord.started_at) < after)
    sql = str(query.compile(dialect=store.engine.dialect,
                            compile_kwargs={"literal_binds": True}))
    utc = (report.started_at + timedelta(minutes=1)).astimezone(UTC)
    assert utc.strftime("%Y-%m-%d %H:%M:%S") in sql
    with store.engine.connect() as connection:
        assert len(connection.exec_driver_sql(sql).all()) == 1
    store.engine.dispose()
