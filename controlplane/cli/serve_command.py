"""``headroom serve``: production. The reconcile jobs and the gRPC placement API against the
configured backend, after every check that makes nothing (forecast method, listen addresses,
models) has passed; ``--dry-run`` plans and records but never applies."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from controlplane.cli.listen_addresses import check_listen_addresses
from controlplane.cli.store_origin import db_url_named
from controlplane.logsetup import setup_logging

if TYPE_CHECKING:
    from controlplane.settings import Settings

console = Console(stderr=True)


def _settings(config: Path | None, **overrides: object) -> Settings:
    from controlplane.settings import load_settings

    return load_settings(config, **{k: v for k, v in overrides.items() if v is not None})


def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML settings file")],
    dry_run: Annotated[bool, typer.Option("--dry-run",
                                          help="plan and record, never apply")] = False,
) -> None:
    """Production: reconcile jobs + gRPC placement API against the configured backend."""
    from controlplane.cli.forecast_method import check_forecast_method
    from controlplane.forecast_refresh import check_state_dir
    from controlplane.jobs import stop_on_sigterm
    from controlplane.reconcile_config import check_autoscaling_models
    from controlplane.serve import check_models, run_serve
    from controlplane.sim.catalog import DEMO_MODELS

    settings = _settings(config)
    check_forecast_method(settings, config)
    check_listen_addresses(settings, config, ports_free=True)
    with db_url_named(settings):
        check_models(settings)  # reads only: before the state dir and the store are made
    if settings.backend == "sim":  # its models are known before the store is opened
        check_autoscaling_models(settings.autoscaling, DEMO_MODELS)
    check_state_dir(settings.forecast.state_dir)  # makes it: after the checks that make nothing
    if dry_run:
        settings = settings.model_copy(update={"safety": settings.safety.model_copy(
            update={"dry_run": True})})
    setup_logging(logging.INFO)
    stop_event = stop_on_sigterm()  # before anything starts: a stop while starting is clean
    with db_url_named(settings):
        run_serve(settings, console, stop_event)
