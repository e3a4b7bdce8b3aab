"""Startup lines of ``headroom serve``, ``demo`` and ``dashboard`` print whole on a console that
is not a terminal (a pipe is 80 columns to Rich; these are narrower still), so a reader that
greps the address finds it with the rest of its line."""

from __future__ import annotations

import io
import re

from rich.console import Console

from controlplane.placement_api import start_placement_api
from controlplane.settings import load_settings
from controlplane.startup_lines import print_demo_start, print_line
from scheduler.engine import PlacementEngine


def _narrow() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=30), out


def test_serves_address_line_holds_the_address_and_dry_run_on_one_line() -> None:
    console, out = _narrow()
    assert not console.is_terminal
    settings = load_settings(None, placement={"listen": "127.0.0.1:0",
                                              "metrics_listen": "127.0.0.1:0"})
    stop_api, _ = start_placement_api(settings, PlacementEngine(), [], console)
    try:
        lines = out.getvalue().splitlines()
    finally:
        stop_api()
    assert len(lines) == 2, lines
    address = re.fullmatch(r"placement API \(gRPC\) on 127\.0\.0\.1:\d+ \(plaintext, no token\); "
                           r"backend sim; dry_run=(True|False)", lines[0])
    assert address is not None, lines[0]
    assert re.fullmatch(r"placement API metrics on http://127\.0\.0\.1:\d+/metrics",
                        lines[1]), lines[1]


def test_the_demos_first_lines_each_hold_their_address_whole() -> None:
    console, out = _narrow()
    print_demo_start(console, "sqlite:///.headroom/a-rather-long-demo-store-name.db",
                     "127.0.0.1:50051", "http://127.0.0.1:9464/metrics")
    assert out.getvalue().splitlines() == [
        "Headroom demo store sqlite:///.headroom/a-rather-long-demo-store-name.db",
        "placement API (gRPC) on 127.0.0.1:50051",
        "metrics on http://127.0.0.1:9464/metrics"]


def test_a_printed_line_is_neither_wrapped_nor_read_as_markup() -> None:
    console, out = _narrow()
    print_line(console, "dashboard on http://127.0.0.1:8501 (store sqlite:///[demo].db)")
    assert out.getvalue() == "dashboard on http://127.0.0.1:8501 (store sqlite:///[demo].db)\n"
