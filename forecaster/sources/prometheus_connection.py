"""How Headroom connects to Prometheus: ``prometheus_client`` builds the one client (basic auth
or a bearer token, TLS verification, retries of an overloaded server's answers);
``unreachable`` names a request that got no answer, and ``auth_hint`` says what a failed
request's error suggests (an untrusted TLS certificate, refused credentials)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from forecaster.errors import SourceError, SourceUnreachable
from forecaster.sources.prometheus_replies import short, shown_url

RETRY_BACKOFF_S = 1.0  # urllib3's backoff factor between retries of a request
RETRY_ON_STATUS = (408, 429, 500, 502, 503, 504)
_AUTH_REFUSED = (401, 403)


def prometheus_client(url: str, timeout_s: float, *, username: str | None = None,
                      password: str | None = None, bearer_token: str | None = None,
                      retries: int = 0, verify: bool | str = True) -> PrometheusConnect:
    """The one way Headroom builds a Prometheus client: basic auth in the URL or as
    ``username``/``password``, or a bearer token. ``retries``: of a request answered with one of
    ``RETRY_ON_STATUS``, with backoff; a request that failed to connect or timed out is never
    retried (each try would wait the whole ``timeout_s`` again, and resend an expensive query
    to a Prometheus already too slow for it), and its timeout surfaces as
    ``requests.Timeout``. ``verify``: an https server's certificate is checked against the
    system's CAs (True), a CA bundle file (its path), or not at all (False: credentials and the
    load Headroom scales on could then come from anyone on the path)."""
    if bearer_token and (username or password or urlsplit(url).password):
        raise SourceError(f"Prometheus at {shown_url(url)}: give basic auth or a bearer token, "
                          "not both")
    if (username is None) != (password is None):
        raise SourceError(f"Prometheus at {shown_url(url)}: basic auth needs both a username "
                          "and a password")
    if username is not None and urlsplit(url).password is not None:
        raise SourceError(f"Prometheus at {shown_url(url)}: credentials both in the URL and "
                          "as username/password; give them once")
    headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else None
    auth = (username, password) if username is not None else None
    # read=False re-raises a read timeout as it is; read=0 would wrap it as a connection error;
    # other=0: a failed TLS handshake (an untrusted certificate) fails alike on every try
    retry = Retry(total=retries, connect=0, read=False, other=0, status=retries,
                  backoff_factor=RETRY_BACKOFF_S,
                  status_forcelist=RETRY_ON_STATUS if retries else None)
    session = requests.Session()
    session.verify = verify
    return PrometheusConnect(url=url, headers=headers, auth=auth, session=session,
                             timeout=timeout_s, retry=retry)


def unreachable(exc: requests.RequestException, shown: str, timeout_s: float, then: str,
                hide: Callable[[str], str]) -> SourceUnreachable:
    """A request to the Prometheus at ``shown`` that failed without an answer: it did not answer
    within ``timeout_s`` (a timeout is not retried), or could not be reached (the error's text
    passed through ``hide``, which removes credentials); ``then`` follows the reason."""
    if isinstance(exc, requests.Timeout):
        return SourceUnreachable(f"Prometheus at {shown} did not answer within "
                                 f"{timeout_s:g} s (prometheus.timeout_s){then}")
    return SourceUnreachable(f"Prometheus at {shown} is unreachable "
                             f"({hide(short(exc))}){then}{auth_hint(exc)}")


def auth_hint(exc: BaseException) -> str:
    """What to check after a failed request: the CA of an untrusted certificate, or refused
    credentials; "" otherwise (the text follows the error's message)."""
    if isinstance(exc, requests.exceptions.SSLError):
        return ("; its TLS certificate is not trusted here: give the CA file that signed it "
                "(prometheus.ca_file)")
    text = str(exc)
    if any(f"HTTP Status Code {code}" in text for code in _AUTH_REFUSED):
        return "; the credentials were refused (check the username and password or the token)"
    return ""
