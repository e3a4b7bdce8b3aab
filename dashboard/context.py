"""Where the dashboard's data comes from: the configured store URL and one engine per URL.

The store URL comes from settings (``HEADROOM_DB__URL``). The dashboard never writes and never
migrates; a store without the schema, or a SQLite file that does not exist, gets a message instead
of a traceback (and no empty file is created).
"""

from __future__ import annotations

import functools
import gc
import re
from collections.abc import Callable
from typing import ParamSpec

import pandas as pd
import streamlit as st
from sqlalchemy import Engine, Select, inspect
from sqlalchemy.exc import SQLAlchemyError

from controlplane.domain.errors import error_line
from controlplane.settings import ConfigError, load_inherited_settings
from controlplane.store.engine import (
    StoreUnavailable,
    make_engine,
    missing_schema,
    redact,
    sqlite_file,
)
from dashboard.markdown import escape_markdown

TTL_S = 10  # seconds a query result is reused before the store is asked again
LOCK_TIMEOUT_S = 5.0  # a read waiting longer on another session's lock (PostgreSQL) fails


#: how much longer than dashboard.query_timeout_s a page waits on a silent PostgreSQL server:
#: a slow read gets the server's own statement_timeout error first
STATEMENT_GRACE_S = 5.0

P = ParamSpec("P")


@functools.cache
def freeze_imported_heap() -> None:
    """Once a process, after the imports: move every object alive (modules, classes, functions
    of pandas, altair, SQLAlchemy, Streamlit: most of the server's heap) out of the garbage
    collector's sight (``gc.freeze``). A page's first render builds tens of thousands of
    objects (placements read, cost lines), enough to set off full collections, each of which
    otherwise walks that whole heap again: 0.1-0.4 s a page. Nothing frozen is freed by a
    collection later, so it is done once, before any page ran."""
    gc.freeze()


def page_response_timeout(db_response_timeout_s: float,
                          query_timeout_s: float) -> tuple[float, str]:
    """How long a page waits on a PostgreSQL server that answers nothing (a stalled network),
    and what sets it: db.response_timeout_s, or sooner dashboard.query_timeout_s and a grace,
    since no read of a live server runs longer."""
    if db_response_timeout_s <= query_timeout_s + STATEMENT_GRACE_S:
        return db_response_timeout_s, "db.response_timeout_s"
    return (query_timeout_s + STATEMENT_GRACE_S,
            f"dashboard.query_timeout_s + {STATEMENT_GRACE_S:g} s")


@st.cache_resource(show_spinner=False)
def engine_for(url: str) -> Engine:
    """The engine of ``url``, opened with ``db.connect_timeout_s`` as the CLI and server open
    the store: a hung server fails the page after that setting, not after a default. A read
    running past ``dashboard.query_timeout_s`` (PostgreSQL) fails the page, not hangs it; so
    does one the server never answers (a stalled network: ``page_response_timeout``)."""
    settings = load_inherited_settings()
    response_timeout_s, response_setting = page_response_timeout(
        settings.db.response_timeout_s, settings.dashboard.query_timeout_s)
    return make_engine(url, settings.db.connect_timeout_s, lock_timeout_s=LOCK_TIMEOUT_S,
                       statement_timeout_s=settings.dashboard.query_timeout_s,
                       response_timeout_s=response_timeout_s, response_setting=response_setting)


def read_frame(url: str, query: Select[tuple[object, ...]], columns: list[str]) -> pd.DataFrame:
    """The rows ``query`` reads from the store at ``url``, as a frame of ``columns``."""
    with engine_for(url).connect() as connection:
        rows = [tuple(r) for r in connection.execute(query)]
    return pd.DataFrame(rows, columns=columns)


def utc_columns(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """``frame`` with each of ``columns`` as UTC timestamps."""
    for column in columns:
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def store_url() -> str:
    """The store URL, or stop the page with a one-line error naming the cause."""
    try:
        url = load_inherited_settings().db.url
        missing = sqlite_file(url)
        if missing is not None and not missing.exists():
            st.info(f"No store file at `{missing}` (from the store URL `{url}`). Start "
                    "`headroom demo`, or run `headroom db upgrade` and a reconcile "
                    "(`headroom serve`), or open an existing store: `headroom dashboard "
                    "--db FILE`, or `HEADROOM_DB__URL`.")
            st.stop()
        engine = engine_for(url)
    except (ConfigError, StoreUnavailable) as error:
        st.error(f"Cannot open the store: {escape_markdown(str(error))}")
        st.stop()
        raise  # st.stop() raises; this keeps type checkers honest
    try:
        has_schema = inspect(engine).has_table("ticks")
    except SQLAlchemyError as error:  # the store went away after the engine was made
        show_store_failure(redact(url), error)
        st.stop()
        raise
    if not has_schema:
        st.info(f"The store at `{redact(url)}` has no Headroom schema yet. "
                "Run `headroom db upgrade` (or start `headroom demo`).")
        st.stop()
    return url


def show_store_failure(url: str, error: SQLAlchemyError) -> None:
    """One error line for a store that failed while a page read it (gone, or an older schema
    missing a table or column), in place of the SQL traceback. ``url`` is shown as given."""
    line = error_line(error)
    st.error(f"Cannot read the store at `{url}`: {escape_markdown(line)}{_failure_hint(line)}")


#: what they say when another session holds a lock the read waited on too long
_LOCKED = re.compile(r"lock timeout|database is locked")
#: what PostgreSQL says of a read that ran past its statement_timeout
_SLOW = re.compile(r"statement timeout")


def _failure_hint(line: str) -> str:
    if missing_schema(line):
        return " (if the schema is older than this Headroom, run `headroom db upgrade`)"
    if _LOCKED.search(line):
        return (" (another session holds a lock on the store, e.g. a migration; reload the page "
                "once it is done)")
    if _SLOW.search(line):
        return (" (a read of the store took longer than dashboard.query_timeout_s = "
                f"{load_inherited_settings().dashboard.query_timeout_s:g} s)")
    return ""


def reads_store(page: Callable[P, None]) -> Callable[P, None]:
    """A store error while ``page`` runs is one line, not a SQL traceback. The app wraps its
    pages in it; a fragment (below ``@st.fragment``) needs its own, since Streamlit runs
    fragments apart from the page."""
    @functools.wraps(page)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            page(*args, **kwargs)
        except SQLAlchemyError as error:
            show_store_failure(redact(load_inherited_settings().db.url), error)
    return guarded
