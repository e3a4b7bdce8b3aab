"""The errors ``headroom`` prints as one ``error:`` line with exit code 2, not a traceback:
UsageError (bad usage a command finds itself), the errors of ``ONE_LINE_ERRORS`` (counted only
once their modules are imported), and an OSError about a file, its name cut short
(``file_error_line``); ``controlplane.cli.main`` maps them."""

from __future__ import annotations

import os
import sys


class UsageError(Exception):
    """A one-line error for the user (exit code 2)."""


#: characters of a file name an ``error:`` line shows before cutting it short
SHOWN_FILENAME_CHARS = 60


def file_error_line(error: OSError) -> str:
    """``FILE: what went wrong`` of an OSError about a file, a very long name cut short."""
    filename = error.filename
    name = os.fsdecode(filename) if isinstance(filename, str | bytes) else str(filename)
    if len(name) > SHOWN_FILENAME_CHARS:
        name = name[:SHOWN_FILENAME_CHARS] + "…"
    return f"{name}: {error.strerror or error}"


#: the errors ``main`` prints as one line, by the module defining them; commands import their
#: modules as they run (not at every start), and a module never imported raised none of them
ONE_LINE_ERRORS = {"controlplane.settings": ("ConfigError",),
                   "controlplane.store.engine": ("StoreUnavailable", "MigrationError"),
                   "controlplane.serve": ("ServeError",),
                   "controlplane.fleet_lease": ("FleetLeaseHeld",)}


def one_line_errors() -> tuple[type[Exception], ...]:
    """UsageError and the errors of ``ONE_LINE_ERRORS`` whose modules are imported."""
    imported = [sys.modules.get(name) for name in ONE_LINE_ERRORS]
    return (UsageError, *(getattr(module, error) for module, errors in
                          zip(imported, ONE_LINE_ERRORS.values(), strict=True)
                          if module is not None for error in errors))
