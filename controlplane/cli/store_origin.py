"""Store errors that say where ``db.url`` came from.

A store that cannot be reached is named by its URL, but the URL may come from a command-line
option, the environment (``HEADROOM_DB__URL``), the config file or the default; an operator
fixing it needs to know which. Commands run their store work inside ``db_url_named``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from controlplane.settings import Settings
from controlplane.store import StoreUnavailable
from controlplane.store.engine import error_line, redact


@contextmanager
def db_url_named(settings: Settings) -> Iterator[None]:
    """A StoreUnavailable raised inside names the origin of ``settings.db.url``."""
    try:
        yield
    except StoreUnavailable as error:
        raise StoreUnavailable(f"{error} (db.url from {settings.db_url_from})") from None


def store_error_line(url: str, error: BaseException) -> str:
    """A database error of a command's store work in one line; most often the schema is older
    than this Headroom."""
    return (f"store {redact(url)}: {error_line(error)} (is the schema current? run `headroom db "
            "upgrade`)")

