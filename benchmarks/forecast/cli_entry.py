"""``headroom``-compatible entry for the judge when the console script lacks ``forecast``.

Used by the benchmark only as a fallback: ``python cli_entry.py forecast backtest ...`` runs the
same Typer sub-app the ``headroom`` console script registers.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import typer

from controlplane.cli.forecast import app as forecast_app

root = typer.Typer(add_completion=False)
root.add_typer(forecast_app, name="forecast")


@root.callback()
def _root() -> None:
    """Headroom (forecast commands only)."""


if __name__ == "__main__":
    root()
