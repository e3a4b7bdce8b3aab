"""Columns a store may be too old to hold (added by a later migration): each is read as NULL
there, so a page, a report or an export over a store not yet upgraded reads as one that recorded
nothing in them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Engine, Table, inspect, null


def stored_names(engine: Engine, table_name: str) -> frozenset[str]:
    """The columns the store's ``table_name`` has (a missing table: none; a query of it then
    fails naming the table)."""
    schema = inspect(engine)
    if not schema.has_table(table_name):
        return frozenset()
    return frozenset(c["name"] for c in schema.get_columns(table_name))


def columns_or_null(engine: Engine, table: Table, names: Sequence[str]
                    ) -> list[ColumnElement[Any]]:
    """``table``'s columns ``names``, each one the store lacks a NULL labelled as it."""
    stored = stored_names(engine, table.name)
    return [table.c[name] if name in stored else null().label(name) for name in names]
