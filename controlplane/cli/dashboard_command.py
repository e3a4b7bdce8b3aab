"""``headroom dashboard``: the Streamlit dashboard over the configured store (read-only), run in
the foreground once its store, address and port are checked, with the environment
(``dashboard_environment``) that hands its pages the same store and settings file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from controlplane.cli.child import run_in_foreground
from controlplane.cli.demo_store import settings_with_db
from controlplane.cli.error_lines import UsageError
from controlplane.cli.store_origin import ConfigOption, DbOption, db_url_named
from controlplane.startup_lines import print_line
from scheduler.metrics import check_bindable

console = Console(stderr=True)


def dashboard(config: ConfigOption = None,
              port: Annotated[int | None, typer.Option(
                  help=escape("port to serve on [default: dashboard.port, 8501]"), min=0,
                  max=65535)] = None,
              address: Annotated[str | None, typer.Option(
                  help=escape("address to bind [default: dashboard.address, 127.0.0.1]"))] = None,
              db: DbOption = None,
              ) -> None:
    """The Streamlit dashboard over the configured store (read-only)."""
    from controlplane.demo import dashboard_command, port_or_free
    from controlplane.store.configured import open_store
    from controlplane.store.engine import check_known_revision, redact, sqlite_file

    settings = settings_with_db(config, db)
    store_file = sqlite_file(settings.db.url)
    if store_file is None or store_file.exists():  # a missing one: the pages say what to do
        with db_url_named(settings):  # fail fast, one line
            engine = open_store(settings.db).engine
        try:  # a store a newer Headroom migrated: its pages could misread it
            check_known_revision(engine, settings.db.url)
        finally:
            engine.dispose()
    address = address or settings.dashboard.address
    port_named = "--port" if port is not None else f"{config or 'configuration'}: dashboard.port"
    port = port if port is not None else settings.dashboard.port
    try:
        check_bindable(f"{address}:{port}")
    except ValueError as error:
        where = "--address" if address != settings.dashboard.address else (
            f"{config or 'configuration'}: dashboard.address")
        raise UsageError(f"{where} {address}: {error}") from None
    if port == 0:  # a free one now, so that the line below names the port Streamlit serves on
        port = port_or_free(address, 0)
    try:  # else Streamlit exits on its own line after ours named a URL another server may hold
        check_bindable(f"{address}:{port}", port_free=True)
    except ValueError as error:
        raise UsageError(f"{port_named} {port}: {error}") from None
    print_line(console, f"dashboard on http://{address}:{port} (store {redact(settings.db.url)})")
    env = dashboard_environment(os.environ, settings.db.url, config)
    raise typer.Exit(run_in_foreground(dashboard_command(address, port), env))


def dashboard_environment(environ: Mapping[str, str], db_url: str,
                          config: Path | None) -> dict[str, str]:
    """The Streamlit child's environment: ``environ`` with the store URL the command checked,
    and the settings file it loaded (its pages load the same one, so ``reconcile.interval_s``,
    ``dashboard.query_timeout_s`` and the ``db`` timeouts are the file's), or none."""
    from controlplane.settings import CONFIG_FILE_ENV

    env = {key: value for key, value in environ.items() if key != CONFIG_FILE_ENV}
    env["HEADROOM_DB__URL"] = db_url
    if config is not None:  # absolute: the child's working directory is not this one's concern
        env[CONFIG_FILE_ENV] = str(config.absolute())
    return env
