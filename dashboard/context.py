"""Where the dashboard's data comes from: the configured store URL and one engine per URL.

The store URL comes from settings (``HEADROOM_DB__URL``). The dashboard never writes and never
migrates; a store without the schema, or a SQLite file that does not exist, gets a message instead
of a traceback (and no empty file is created).
"""

from __future__ import annotations

import streamlit as st
from sqlalchemy import Engine, inspect
from sqlalchemy.exc import SQLAlchemyError

from controlplane.settings import ConfigError, load_settings
from controlplane.store.engine import StoreUnavailable, make_engine, sqlite_file

TTL_S = 10  # seconds a query result is reused before the store is asked again


@st.cache_resource(show_spinner=False)
def engine_for(url: str) -> Engine:
    return make_engine(url)


def store_url() -> str:
    """The store URL, or stop the page with a one-line error naming the cause."""
    try:
        url = load_settings().db.url
        missing = sqlite_file(url)
        if missing is not None and not missing.exists():
            st.info(f"No store file at `{missing}` (from the store URL `{url}`). Start "
                    "`headroom demo`, or run `headroom db upgrade` and a reconcile "
                    "(`headroom serve`), or point `HEADROOM_DB__URL` at an existing store.")
            st.stop()
        engine = engine_for(url)
    except (ConfigError, StoreUnavailable) as error:
        st.error(f"Cannot open the store: {error}")
        st.stop()
        raise  # st.stop() raises; this keeps type checkers honest
    try:
        has_schema = inspect(engine).has_table("ticks")
    except SQLAlchemyError as error:  # the store went away after the engine was made
        reason = str(error).strip().splitlines()[0]
        st.error(f"Cannot read the store at `{engine.url.render_as_string()}`: {reason}")
        st.stop()
        raise
    if not has_schema:
        st.info(f"The store at `{engine.url.render_as_string()}` has no Headroom schema yet. "
                "Run `headroom db upgrade` (or start `headroom demo`).")
        st.stop()
    return url
