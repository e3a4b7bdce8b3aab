"""PostgreSQL connections that stop waiting on a server that stopped answering.

A network that stalls after the connection is made (a partition, a dead load balancer: the
socket stays open, no byte and no reset comes back) would hang the statement waiting on it for
ever: the server's statement_timeout cannot fire, since the server never hears the statement,
and libpq has no read timeout. So every wait of a Headroom connection (a statement, its commit
or rollback, the pool's pre-ping) is bounded by ``response_timeout_s``: past it the statement
is cancelled on the server (when the server still hears: a statement that was only waiting, e.g.
for a lock, would otherwise stay queued there holding its own locks after the client gave up),
the connection is closed (SQLAlchemy then drops it from the pool) and the wait fails with an
error naming the server. The kernel bounds a real partition as well: TCP keepalives and
``tcp_user_timeout`` (libpq >= 12) close a connection whose peer stopped acknowledging, idle in
the pool included.
A load balancer that still acknowledges but forwards nothing is caught by the first bound only.
"""

from __future__ import annotations

import math
from contextlib import suppress
from typing import Any

import psycopg
from psycopg.abc import PQGen
from psycopg.conninfo import conninfo_to_dict
from psycopg.errors import ConnectionTimeout, _WaitTimeout

#: db.response_timeout_s's default, longer than any statement Headroom runs (DbSettings, which
#: imports no database library, repeats it; a test checks the two agree)
DEFAULT_RESPONSE_TIMEOUT_S = 120.0

#: the setting a new connection's timeout comes from (libpq's ``connect_timeout``)
CONNECT_SETTING = "db.connect_timeout_s"

#: how long a wait that gave up tries to cancel its statement on the server (a new connection
#: to it, answered at once by a server that hears: a stalled network fails this too, and the
#: close that follows is all that is left)
CANCEL_WAIT_S = 0.5


class BoundedConnection(psycopg.Connection[Any]):
    """A psycopg connection whose waits on the server last at most ``response_timeout_s``."""

    response_timeout_s: float = DEFAULT_RESPONSE_TIMEOUT_S
    response_setting: str = "db.response_timeout_s"  # the setting the message names

    def wait(self, gen: PQGen[Any], interval: float = 0.1, timeout: float | None = None) -> Any:
        if timeout is not None:  # a caller's own bound (notifies): psycopg handles it
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, self.response_timeout_s)
        except _WaitTimeout:
            server = f"{self.info.host}:{self.info.port}"
            self._cancel_on_server()
            self.close()  # mid-protocol: unusable (SQLAlchemy sees it closed: a disconnect)
            raise psycopg.OperationalError(
                f"no answer from the database server at {server} within "
                f"{self.response_timeout_s:g} s ({self.response_setting}): a stalled network "
                "or load balancer?") from None

    def _cancel_on_server(self) -> None:
        """Ask the server to cancel the statement this connection waits on, so that it does not
        run on (or wait on, holding its locks) after the client gave up: closing alone does not
        end it, the server reads the close only once the statement is done. A cancel that
        fails is left unsaid: the server did not hear it either (the stall the error names)."""
        with suppress(psycopg.Error):
            self.cancel_safe(timeout=min(CANCEL_WAIT_S, self.response_timeout_s))


def keepalive_args(response_timeout_s: float) -> dict[str, int]:
    """libpq's TCP settings that close a connection whose peer stopped acknowledging within
    about ``response_timeout_s``: the first keepalive after a third of it idle, three more a
    ninth apart; ``tcp_user_timeout`` bounds unacknowledged data (milliseconds)."""
    return {"keepalives": 1,
            "keepalives_idle": max(1, math.floor(response_timeout_s / 3)),
            "keepalives_interval": max(1, math.floor(response_timeout_s / 9)),
            "keepalives_count": 3,
            "tcp_user_timeout": max(1, int(response_timeout_s * 1000))}


def bounded_connect(response_timeout_s: float, response_setting: str) -> Any:
    """A ``do_connect`` listener: the engine's connections are ``BoundedConnection``s, and one
    the server does not answer within the connect timeout fails naming the server and the
    setting (libpq says only "connection timeout expired", which every read or write of a
    stalled store then logs)."""
    def connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> BoundedConnection:
        try:
            connection = BoundedConnection.connect(*cargs, **cparams)
        except ConnectionTimeout:
            raise ConnectionTimeout(unanswered_connect(cargs, cparams)) from None
        connection.response_timeout_s = response_timeout_s
        connection.response_setting = response_setting
        return connection
    return connect


#: the connect arguments that say which server a connection is to, and how long it waits
_SERVER_KEYS = ("host", "hostaddr", "port", "connect_timeout")


def unanswered_connect(cargs: Any, cparams: Any) -> str:
    """The error of a connection the server at ``cargs`` / ``cparams`` (psycopg's connect
    arguments) did not answer within their ``connect_timeout``: ``db.connect_timeout_s``, the
    only setting ``make_engine`` sets it from."""
    params = {**(conninfo_to_dict(cargs[0]) if cargs else {}),  # no psycopg option (context)
              **{key: value for key, value in cparams.items() if key in _SERVER_KEYS}}
    host = params.get("host") or params.get("hostaddr") or "localhost"
    server = f"{host}:{params.get('port') or 5432}"
    return (f"no connection to the database server at {server} within "
            f"{params.get('connect_timeout', '?')} s ({CONNECT_SETTING}): it is down, or the "
            "network to it stalled")
