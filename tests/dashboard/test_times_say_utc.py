"""Every time and day a page shows says it is UTC (the store's clock), whatever the browser's
zone: rendered by Streamlit's AppTest over a store the real core filled."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def _open(path: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    if path != "views/overview.py":
        at.switch_page(path).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_overviews_last_tick_says_its_time_is_utc(dashboard_env: str) -> None:
    at = _open("views/overview.py")
    shown = {m.label: m.value for m in at.metric}["Last tick (UTC)"]
    assert re.fullmatch(r"\d\d:\d\d:\d\d", shown), shown


def test_the_decisions_pages_times_say_they_are_utc(dashboard_env: str) -> None:
    at = _open("views/decisions.py")
    (actions,) = [d.value for d in at.dataframe if "action" in d.value.columns]
    assert actions.columns[0] == "at (UTC)"
    assert at.expander
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC · revision ", e.label)
               for e in at.expander), [e.label for e in at.expander]


def test_the_cost_pages_daily_totals_say_their_days_are_utc(dashboard_env: str) -> None:
    at = _open("views/cost.py")
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    (daily,) = [s for s in specs if s.get("mark", {}).get("type") == "bar"]
    assert daily["encoding"]["x"]["title"] == "day (UTC)"
