"""URLs as messages show them, without their secrets (pure): the password of the user part,
and the value of each query parameter that holds one (libpq takes ``?password=`` and
``?sslpassword=`` as well as ``user:password@``)."""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

#: what a query parameter holding a secret is named with (password, sslpassword, secret,
#: client_secret, token, access_token, ...), whatever its case
_SECRET_NAME = re.compile("password|secret|token", re.IGNORECASE)
#: one query parameter: its separator, its name and ``=``, and its value (up to the next
#: ``&``, as SQLAlchemy splits the query: a ``#`` or ``;`` in a password is the password's)
_PARAM = re.compile(r"([?&])([^?&=]*=)([^&]*)")
#: the user part of a URL after ``scheme://``, as SQLAlchemy reads it: a user name without
#: ``:`` or ``/``, then an optional ``:password`` up to the first ``@``
_USER_PART = re.compile(r"([^:/]*)(?::[^@]*)?@")
HIDDEN = "***"


def hide_query_secrets(url: str) -> str:
    """``url`` with the value of each query parameter named for a secret shown as ``***``."""
    if "?" not in url:
        return url

    def hidden(param: re.Match[str]) -> str:
        separator, name, value = param.groups()
        if not value or _SECRET_NAME.search(unquote_plus(name)) is None:
            return param.group()
        return f"{separator}{name}{HIDDEN}"

    head, _, query = url.partition("?")
    return head + _PARAM.sub(hidden, "?" + query)


def redact(url: str) -> str:
    """``url`` for messages: without the password of its user part (``user@host``) and with the
    values of its secret query parameters shown as ``***`` (``hide_query_secrets``)."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    user = _USER_PART.match(rest)
    if user is not None:
        rest = f"{user.group(1)}@{rest[user.end():]}"
    return f"{scheme}://{hide_query_secrets(rest)}"


def masked(url: str) -> str:
    """``url`` as a settings error echoes it: its password shown as ``***`` (``user:***@``), as
    are its secret query parameters' values."""
    return hide_query_secrets(re.sub(r":[^:@/]*@", f":{HIDDEN}@", url))
