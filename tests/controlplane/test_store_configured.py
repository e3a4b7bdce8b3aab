"""The store opened from the ``db`` settings group carries every bound of the group: the connect
and response timeouts and the migration lock's wait are said once, by the factory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controlplane.settings import load_settings
from controlplane.store.configured import (
    listed_model_count,
    open_existing_store,
    open_read_only,
    open_store,
)
from controlplane.store.pg_response import BoundedConnection

CONTROLPLANE = Path(__file__).resolve().parents[2] / "controlplane"


@pytest.mark.postgres
def test_a_store_opened_from_the_db_settings_answers_to_its_response_timeout(
        postgres_url: str) -> None:
    db = load_settings(None, db={"url": postgres_url, "connect_timeout_s": 3,
                                 "response_timeout_s": 7}).db
    store = open_store(db, migrate=True)
    existing = open_existing_store(db)
    read_only = open_read_only(db)
    try:
        for engine in (store.engine, existing.engine, read_only):
            with engine.connect() as connection:
                raw = connection.connection.driver_connection
                assert isinstance(raw, BoundedConnection)
                assert raw.response_timeout_s == 7
                assert raw.info.get_parameters()["connect_timeout"] == "3"
        assert listed_model_count(db) == 0
    finally:
        for engine in (store.engine, existing.engine, read_only):
            engine.dispose()


def test_no_command_says_the_connect_and_response_timeouts_side_by_side() -> None:
    """Only the store's factories (and the dashboard, whose pages bound a read more tightly)
    name ``db.response_timeout_s``: a command hands over ``settings.db`` whole."""
    said = sorted(str(path.relative_to(CONTROLPLANE)) for path in CONTROLPLANE.rglob("*.py")
                  if re.search(r"\.db\.response_timeout_s", path.read_text()))
    assert said == []
