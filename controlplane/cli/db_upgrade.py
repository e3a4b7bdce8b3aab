"""``headroom db upgrade [REVISION]``: apply Alembic migrations to the configured store (or the
SQLite file ``--db`` names); a new SQLite file left empty by an unknown revision is removed."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from controlplane.cli.demo_store import settings_with_db
from controlplane.cli.store_origin import ConfigOption, DbOption, db_url_named, refuse_in_memory

console = Console(stderr=True)


def db_upgrade(config: ConfigOption = None,
               revision: Annotated[str, typer.Argument(
                   metavar="REVISION", help="target revision")] = "head",
               db: DbOption = None) -> None:
    """Apply Alembic migrations up to REVISION (default: head)."""
    from controlplane.store import MigrationError, upgrade
    from controlplane.store.configured import open_store
    from controlplane.store.engine import redact, sqlite_file

    settings = settings_with_db(config, db)
    refuse_in_memory(settings.db.url)
    store_file = sqlite_file(settings.db.url)
    new_file = store_file is not None and not store_file.exists()
    with db_url_named(settings):
        store = open_store(settings.db)
    try:
        upgrade(store.engine, revision, settings.db.migration_lock_wait_s)
    except MigrationError:
        if new_file and store_file is not None:  # an unknown revision: leave no empty store
            store.engine.dispose()
            store_file.unlink(missing_ok=True)
        raise
    console.print(f"database {redact(settings.db.url)} upgraded to {revision}", soft_wrap=True,
                  markup=False, highlight=False)  # the URL whole: copied as it is shown
