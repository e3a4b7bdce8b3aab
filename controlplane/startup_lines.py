"""The lines ``headroom serve``, ``headroom demo`` and ``headroom dashboard`` start and end with,
each printed whole: a console that is not a terminal (a pipe, a log file, a supervisor) is 80
columns wide for Rich, and a wrapped address line (``... backend sim;`` then ``dry_run=False``)
is two lines to a reader that greps or parses it."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape


def print_line(out: Console, line: str) -> None:
    """``line`` on one line whatever ``out``'s width: not wrapped, its brackets not read as
    markup, nothing highlighted."""
    out.print(line, soft_wrap=True, markup=False, highlight=False)


def print_demo_start(out: Console, db_url: str, grpc_address: str,
                     metrics_url: str | None) -> None:
    """The demo's first lines: its store (``db_url``, redacted), its gRPC address and, when
    served, its metrics URL."""
    out.print(f"[bold]Headroom demo[/] store {escape(db_url)}", soft_wrap=True, highlight=False)
    print_line(out, f"placement API (gRPC) on {grpc_address}")
    if metrics_url:
        print_line(out, f"metrics on {metrics_url}")
