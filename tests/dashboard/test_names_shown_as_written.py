"""Names and reasons the store holds (model names, hint reasons, unplaced models) are shown as
written on every page, not read as Streamlit markdown: a model named with `*`, `_`, `[x](y)` or
`$` must not turn bold, into a link or into math. Rendered by Streamlit's AppTest over copies of a
store the real core filled."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from dashboard_support import Seeded, open_page, with_a_renamed_model

from controlplane.domain.hints import DemandHint
from controlplane.store.engine import make_engine
from controlplane.store.hints import SqlDemandHints
from dashboard.markdown import escape_markdown

NAME = "**bold**_emb_ [x](http://evil.example) <b>b</b> $a^2$"
REASON = "launch [press](http://evil.example/p) **now**"


def _with_a_markdown_model(seeded: Seeded, tmp_path: Path) -> str:
    """A copy of the seeded store where bert-embed is named NAME and its newest plan left one of
    its replicas unplaced."""
    return with_a_renamed_model(seeded.url, tmp_path / "markdown.db", NAME)


def test_the_models_page_shows_a_model_name_and_its_hints_reason_as_written(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_a_markdown_model(seeded, tmp_path)
    SqlDemandHints(make_engine(url)).add_hint(
        DemandHint(NAME, 900.0, seeded.end_at - timedelta(hours=1),
                   seeded.end_at + timedelta(hours=1), REASON), seeded.end_at)
    at = open_page(url, "views/models.py", monkeypatch)
    at.selectbox[0].set_value(NAME).run()
    assert not at.exception, [e.value for e in at.exception]
    (heading,) = [s.value for s in at.subheader if "forecast band" in s.value]
    assert heading.startswith(f"{escape_markdown(NAME)}: demand, capacity")
    (hint,) = [c.value for c in at.caption if c.value.startswith("Demand hint")]
    assert f"({escape_markdown(REASON)})" in hint
    assert REASON not in hint


def test_the_fleet_and_decisions_pages_show_an_unplaced_models_name_as_written(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _with_a_markdown_model(seeded, tmp_path)
    fleet = open_page(url, "views/fleet.py", monkeypatch)
    (unplaced,) = [w.value for w in fleet.warning if w.value.startswith("Unplaced")]
    assert unplaced == f"Unplaced: {escape_markdown(NAME)}: 1 replica found no GPU"
    decisions = open_page(url, "views/decisions.py", monkeypatch)
    decisions.toggle[0].set_value(False).run()  # the newest plan, whatever it changed
    assert not decisions.exception, [e.value for e in decisions.exception]
    placed = [c.value for c in decisions.caption if "unplaced:" in c.value]
    assert placed and placed[0].endswith(f"unplaced: {escape_markdown(NAME)}: 1 replica found "
                                         "no GPU")


def test_the_what_if_page_names_a_timeline_and_its_policies_as_written(
        seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = "minute,model,demand_rps,ready_replicas,per_replica_rps,gpus_billed,policy\n"
    broken = tmp_path / "[run](evil.example) *b*.csv"
    broken.write_text("minute,model\n0,a\n")
    (tmp_path / "one.csv").write_text(f"{header}0,a,1,1,1,1,**p**\n")
    (tmp_path / "two.csv").write_text(f"{header}0,a,1,1,1,2,**p**\n")
    at = open_page(seeded.url, "views/whatif.py", monkeypatch)
    at.text_area[0].set_value(str(tmp_path)).run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 2
    assert errors[0].startswith(f"{escape_markdown(str(broken))}: missing column(s)")
    assert errors[1] == escape_markdown(
        f"{tmp_path / 'two.csv'}: policy **p** is already shown from {tmp_path / 'one.csv'}; "
        "rename one of the files (or its policy values)")
