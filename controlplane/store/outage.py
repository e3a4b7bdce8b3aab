"""The errors that mean the store cannot be used right now (unreachable, a connection lost or
terminated, locked, not answering in time), not that Headroom did something wrong: a loop
fails the tick on one line naming the error and tries again on the next one."""

from __future__ import annotations

from sqlalchemy.exc import InterfaceError, OperationalError

from scheduler.domain.errors import Unavailable

#: SQLAlchemy's operational and interface errors, and the placement journal's Unavailable
STORE_DOWN: tuple[type[Exception], ...] = (OperationalError, InterfaceError, Unavailable)
