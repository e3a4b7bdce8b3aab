"""Where the dashboard's data comes from: the configured store URL and one engine per URL.

The store URL comes from settings (``HEADROOM_DB__URL``). The dashboard never writes and never
migrates; a store without the schema gets a message instead of a traceback.
"""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine, inspect

from controlplane.settings import ConfigError, load_settings
from controlplane.store.engine import StoreUnavailable, make_engine

TTL_S = 10  # seconds a query result is reused before the store is asked again


@st.cache_resource(show_spinner=False)
def engine_for(url: str) -> Engine:
    return make_engine(url)


def store_url() -> str:
    """The store URL, or stop the page with a one-line error naming the cause."""
    try:
        url = load_settings().db.url
        engine = engine_for(url)
    except (ConfigError, StoreUnavailable) as error:
        st.error(f"Cannot open the store: {error}")
        st.stop()
        raise  # st.stop() raises; this keeps type checkers honest
    if not inspect(engine).has_table("ticks"):
        st.info(f"The store at `{engine.url.render_as_string()}` has no Headroom schema yet. "
                "Run `headroom db upgrade` (or start `headroom demo`).")
        st.stop()
    return url
