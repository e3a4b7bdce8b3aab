"""Prometheus API replies as plain values: the samples of range and instant queries, each
malformed reply a ``ValueError`` saying what was wrong; and URLs and errors as messages show
them (a password as ``***``)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import requests


def shown_url(url: str) -> str:
    """``url`` with its password as ``***`` (basic auth in the URL), for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def matrix_samples(result: object) -> list[tuple[float, float]]:
    """(unix seconds, value) of every sample of a range query's ``data.result`` (a list of
    ``{"metric": ..., "values": [[ts, "value"], ...]}``); ``"NaN"``/``"+Inf"`` stay non-finite.
    Anything else raises ``ValueError`` saying what was wrong."""
    if result is None:
        return []
    if not isinstance(result, list):
        raise ValueError(f"result is {shape(result)}, expected a list of series")
    out: list[tuple[float, float]] = []
    for series in result:
        if not isinstance(series, dict):
            raise ValueError(f"a series is {shape(series)}, expected an object")
        values = series.get("values", [])
        if not isinstance(values, list):
            raise ValueError(f"a series' values are {shape(values)}, expected a list of "
                             "[time, value] pairs")
        for point in values:
            if not isinstance(point, list | tuple) or len(point) != 2:
                raise ValueError(f"sample {clip(point)} is not a [time, value] pair")
            ts, raw = point
            try:
                out.append((float(ts), float(raw)))
            except (TypeError, ValueError):
                raise ValueError(f"sample {clip(point)} is not a number") from None
    return out


def vector_samples(result: object, label: str | None) -> list[tuple[str, float]]:
    """(label value, value) of every series of an instant query's ``data.result`` (a list of
    ``{"metric": {...}, "value": [ts, "value"]}``); the key is "" when ``label`` is None.
    Anything else raises ``ValueError`` saying what was wrong."""
    if result is None:
        return []
    if not isinstance(result, list):
        raise ValueError(f"result is {shape(result)}, expected a list of series")
    out: list[tuple[str, float]] = []
    for series in result:
        if not isinstance(series, dict) or not isinstance(series.get("metric", {}), dict):
            raise ValueError(f"a series is {shape(series)}, expected an object with a metric")
        point = series.get("value")
        if not isinstance(point, list | tuple) or len(point) != 2:
            raise ValueError(f"sample {clip(point)} is not a [time, value] pair")
        try:
            value = float(point[1])
        except (TypeError, ValueError):
            raise ValueError(f"sample {clip(point)} is not a number") from None
        key = "" if label is None else str(series.get("metric", {}).get(label, ""))
        out.append((key, value))
    return out


def not_api(exc: Exception) -> str:
    if isinstance(exc, requests.JSONDecodeError):
        return f"not JSON: {short(exc)}"
    return f"not a Prometheus API reply: {type(exc).__name__} {short(exc)}"


def shape(value: object) -> str:
    kinds = {dict: "a JSON object", list: "a JSON list", str: "a string", type(None): "null"}
    return f"{kinds.get(type(value), type(value).__name__)} {clip(value)}"


def clip(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def short(exc: BaseException) -> str:
    """``exc`` in one line of at most 300 characters. A connection error says why the
    connection failed (urllib3's ``reason``, e.g. ``... [Errno 111] Connection refused``), not
    the retry wrapper, whose full query URL would fill the line and cut the cause off."""
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, BaseException) and str(reason):
        exc = reason
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]
