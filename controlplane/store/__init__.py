"""The SQL store (SQLModel + Alembic): SQLite by default, PostgreSQL by URL."""

from controlplane.store.engine import MigrationError, StoreUnavailable, downgrade, upgrade
from controlplane.store.repository import Store
from controlplane.store.utc import as_utc

__all__ = ["MigrationError", "Store", "StoreUnavailable", "as_utc", "downgrade", "upgrade"]
