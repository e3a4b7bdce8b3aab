"""``--json`` prints one JSON document, also when the command fails.

A command run with ``--json`` prints its document on stdout through ``write_document``. When it
fails instead (bad input, a store it cannot use, a settings or file error, Click's own usage
errors: the ``error:`` lines on stderr and a non-zero exit), ``one_document_on_failure`` prints
``{"ok": false, "exit_code": N, "errors": [...]}`` on stdout, the text of each ``error:`` line
(of Click's message for its usage errors). A command that printed its document and then exits
non-zero on purpose (``status`` unhealthy, ``forecast run`` with failed models) prints nothing
more; without ``--json``, stdout stays empty on failure."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, cast

import typer
from typer.core import TyperGroup


@dataclass
class _Run:
    """What one command run has done so far, for the document at its exit."""

    json_given: bool = False  # its --json option, as Click parsed it
    written: bool = False  # a JSON document went to stdout
    usage_error: bool = False  # Click refused the command line
    errors: list[str] = field(default_factory=list)


_run = _Run()

#: Click's base exception, of the Click that Typer runs on (its own copy, ``typer._click``, in
#: recent Typer; the click package before)
_CLICK_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _ClickError(Protocol):
    def format_message(self) -> str: ...


def _json_given(value: bool) -> bool:
    """``--json``'s Click callback: the command asked for a document."""
    _run.json_given = value
    return value


def json_option(help_text: str = "print one JSON document") -> Any:
    """The ``--json`` option of every command that prints one JSON document."""
    return typer.Option("--json", help=help_text, callback=_json_given)


JsonOption = Annotated[bool, json_option()]


def write_document(text: str) -> None:
    """Print the command's JSON document (``text``) on stdout: the one document of the run."""
    _run.written = True  # first: a reader gone mid-write has had it
    typer.echo(text)


def record_error(line: str) -> None:
    """One ``error:`` line, for the document of a run that fails."""
    _run.errors.append(line)


def failure_document(exit_code: int, errors: Sequence[str]) -> str:
    """The document of a failed run: its exit code and the text of each error line."""
    return json.dumps({"ok": False, "exit_code": exit_code, "errors": list(errors)})


def json_in_args(args: Sequence[str]) -> bool:
    """Whether ``--json`` is among the command line's options (not after ``--``)."""
    options = args[:args.index("--")] if "--" in args else args
    return "--json" in options


def _exit_code(code: object) -> int:
    """SystemExit's code as the process's exit status (None is 0, a message 1)."""
    if code is None or isinstance(code, int):
        return code or 0
    return 1


@contextmanager
def one_document_on_failure(args: Sequence[str]) -> Iterator[None]:
    """Run the command line ``args`` in the block; a non-zero exit of a run that asked for
    ``--json`` (or whose usage error Click refused with ``--json`` among ``args``) and wrote no
    document prints the failure document on stdout."""
    global _run
    _run = _Run()
    try:
        yield
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
        wanted = _run.json_given or (_run.usage_error and json_in_args(args))
        if code and wanted and not _run.written:
            write_document(failure_document(code, _run.errors))
        raise


class JsonErrorsGroup(TyperGroup):
    """The root command group: a usage error Click raises for any command (an unknown or
    missing option, a bad value) is recorded for the failure document; Typer shows it as
    before."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        with _usage_errors_recorded():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        with _usage_errors_recorded():
            return super().invoke(ctx)


@contextmanager
def _usage_errors_recorded() -> Iterator[None]:
    try:
        yield
    except _CLICK_ERROR as error:
        _run.usage_error = True
        record_error(cast(_ClickError, error).format_message())
        raise
