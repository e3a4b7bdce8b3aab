"""Headroom dashboard: a read-only Streamlit multipage app over the store.

Run by ``headroom dashboard`` / ``headroom demo`` as ``streamlit run dashboard/app.py`` with the
store URL in ``HEADROOM_DB__URL``. Pages live in ``dashboard/views/`` (not ``pages/``, which
Streamlit would also list on its own).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# `streamlit run` puts this folder, not the repository, on sys.path; without an installed
# distribution, make the `dashboard` and `controlplane` packages importable.
if importlib.util.find_spec("controlplane") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import streamlit as st

# Import what the pages share once, when the server handles its first request, rather than on
# the first visit of each page (pandas, altair, SQLAlchemy and the store tables take seconds).
import dashboard.costing
import dashboard.history
import dashboard.queries
import dashboard.widgets  # noqa: F401
from dashboard.context import freeze_imported_heap, reads_store

freeze_imported_heap()

PAGES = (
    ("views/overview.py", "Overview", "overview", ":material/dashboard:"),
    ("views/fleet.py", "Fleet", "fleet", ":material/memory:"),
    ("views/models.py", "Models", "models", ":material/show_chart:"),
    ("views/cost.py", "Cost", "cost", ":material/payments:"),
    ("views/decisions.py", "Decisions", "decisions", ":material/rule:"),
    ("views/whatif.py", "What-if", "what-if", ":material/compare_arrows:"),
)


def main() -> None:
    st.set_page_config(page_title="Headroom", page_icon=":material/memory:", layout="wide")
    here = Path(__file__).resolve().parent
    # Streamlit serves the default page at / only, yet reserves its url_path: the Overview
    # reserves "index", and /overview (a bookmark, a typed name) is a hidden page that goes to /
    pages = [st.Page(str(here / path), title=title, icon=icon, default=(slug == "overview"),
                     url_path="index" if slug == "overview" else slug)
             for path, title, slug, icon in PAGES]
    overview = pages[0]

    def overview_by_name() -> None:
        st.switch_page(overview)

    pages.append(st.Page(overview_by_name, title="Overview", url_path="overview",
                         visibility="hidden"))
    # after the page's first check a store can still fail (a table gone, the server)
    reads_store(st.navigation(pages).run)()


main()
