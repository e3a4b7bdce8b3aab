"""Where ``headroom demo`` keeps its store, and the ``--db PATH`` option that names a SQLite
store file on the commands that read or write one (demo, status)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `headroom --help` loads neither
    from controlplane.settings import Settings
    from controlplane.store import StoreUnavailable

#: the demo's store when neither --db nor db.url (environment, --config) names one
DEMO_DB = Path(".headroom/demo.db")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")  # Path() folds a URL's '//' to '/'


def sqlite_url(db: Path) -> str:
    """The SQLAlchemy URL of the SQLite file ``--db`` names (absolute: the dashboard's
    process may run elsewhere); a URL given instead is refused, naming the right setting."""
    from controlplane.settings import ConfigError

    if _URL.match(str(db)):
        raise ConfigError(f"--db {db}: takes a SQLite file path, not a URL; for a database URL "
                          "set db.url (--config) or HEADROOM_DB__URL")
    return f"sqlite:///{url_escaped(str(db.resolve()))}"


def url_escaped(path: str) -> str:
    """``path`` as the database part of a URL that opens it as written: '%', '?' and '#' would
    otherwise be read as an escape, the query and a fragment (other characters stay readable)."""
    return path.replace("%", "%25").replace("?", "%3F").replace("#", "%23")


def settings_with_db(config: Path | None, db: Path | None) -> Settings:
    """Settings from --config and the environment, with db.url from ``--db`` when given."""
    from controlplane.settings import load_settings

    if db is None:
        return load_settings(config)
    return load_settings(config, db={"url": sqlite_url(db)})


def demo_settings(config: Path | None, db: Path | None) -> Settings:
    """The demo's store: --db, else db.url from the environment or --config, else DEMO_DB."""
    from controlplane.settings import load_settings

    if db is None:
        settings = load_settings(config)
        if "url" in settings.db.model_fields_set:
            return settings
        return settings_with_db(config, DEMO_DB).with_db_url_from("the demo's default")
    return settings_with_db(config, db)


def demo_store_hint(settings: Settings) -> str:
    """For a store that is missing under the default db.url while a demo store exists in the
    working directory: how to read that one instead; else ''."""
    if "url" in settings.db.model_fields_set or not DEMO_DB.is_file():
        return ""
    return f"; `headroom demo` keeps its store in {DEMO_DB}: pass --db {DEMO_DB}"


def with_demo_hint(error: StoreUnavailable, settings: Settings) -> StoreUnavailable:
    """``error`` of a store that cannot be read, with the advice that fits where db.url came
    from: under the default db.url, the demo store's in place of the error's when one is
    there to read instead (``demo_store_hint``), the error's alone when not (the demo never
    makes that store: it keeps its own); under a db.url given (--db, the environment,
    --config), the error's advice, if any (a missing file or schema), with the demo, which
    makes and migrates the store its db.url names."""
    from controlplane.store import StoreUnavailable

    hint = demo_store_hint(settings)
    if hint:
        return StoreUnavailable(f"{error.detail}{hint}")
    if error.advice is None or "url" not in settings.db.model_fields_set:
        return error
    return StoreUnavailable(error.detail,
                            f"{error.advice} (or start `headroom demo` with the same db.url)")


def with_upgrade_for(error: StoreUnavailable, url: str) -> StoreUnavailable:
    """``error`` of the store an option named by ``url`` (`forecast run --store`), its advice
    (`headroom db upgrade`, which alone would upgrade the default store) naming that store:
    `--db FILE` for a SQLite file, HEADROOM_DB__URL for a server database."""
    import shlex

    from controlplane.store import StoreUnavailable
    from controlplane.store.engine import sqlite_file

    if error.advice is None:
        return error
    store_file = sqlite_file(url)
    command = (f"`headroom db upgrade --db {shlex.quote(str(store_file))}`"
               if store_file is not None
               else "`headroom db upgrade` with HEADROOM_DB__URL set to this URL")
    return StoreUnavailable(error.detail,
                            error.advice.replace("`headroom db upgrade`", command))
