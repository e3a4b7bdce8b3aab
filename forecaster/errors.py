"""Typed errors of the forecaster. Every message names the series (or source) and the problem."""

from __future__ import annotations


class ForecasterError(Exception):
    """Base class: a problem the caller can report in one line (never a stack trace)."""


class SeriesError(ForecasterError, ValueError):
    """Bad input data for one series (duplicate timestamps, no numeric values, ...)."""

    def __init__(self, series_id: str, problem: str) -> None:
        super().__init__(f"series {series_id!r}: {problem}")
        self.series_id = series_id
        self.problem = problem


class InputError(ForecasterError, ValueError):
    """A bad file, column or option (names the file/column at fault)."""


class SourceError(ForecasterError):
    """A metrics source failed (Prometheus down, query rejected, empty result)."""


class SourceUnreachable(SourceError):
    """The source could not be reached, or did not answer within its timeout. A caller asking
    about several models in turn stops at the first: each further request would wait as long
    again, and a slow source would get more of the load that made it slow. The models it then
    does not ask are unknown for ``not_asked`` (named, with this reason), never 0."""

    def not_asked(self) -> str:
        """Why a model after this failure was not asked."""
        return f"not asked, an earlier request failed: {self}"


class UnknownMethodError(ForecasterError, KeyError):
    """A forecaster name that is not in the registry."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown forecaster"
