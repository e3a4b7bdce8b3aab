"""Keep stdout for the one JSON document: native libraries (e.g. HiGHS's banner) write to fd 1;
and the one-line ``error:`` of a command's bad input (and ``warning:`` and ``note:`` lines), on
stderr.

Messages are plain text: a path, pattern or series name with ``[...]`` in it is printed as
written, not read as Rich markup (which would drop ``[a-z0-9]`` or ``[tenant-a]``)."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from controlplane.cli.json_errors import record_error

_stderr = Console(stderr=True)


def print_error(message: str) -> None:
    """Print ``error: message`` on stderr, on one line; a message listing several problems
    (``domain.errors.listed_problems``), one ``error:`` line each."""
    for line in message.splitlines() or [""]:
        record_error(line)  # for --json's document, should the command fail
        _stderr.print(f"[red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)


def print_warning(message: str) -> None:
    """Print ``warning: message`` on stderr, on one line."""
    _stderr.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def print_note(message: str) -> None:
    """Print ``note: message`` on stderr, on one line: nothing wrong, only worth knowing."""
    _stderr.print(f"note: {escape(message)}", highlight=False, soft_wrap=True)


def usage_error(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; the exit (code 2) for the caller to raise."""
    print_error(message)
    return typer.Exit(code=2)


@contextmanager
def stdout_to_stderr(enabled: bool = True) -> Iterator[None]:
    """Send everything written to fd 1 (Python and C alike) to stderr until the block ends."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved_fd = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved_fd, 1)
        os.close(saved_fd)


class PipeConsole(Console):
    """A stdout Console whose closed pipe raises BrokenPipeError (Rich's own exits 1), for
    ``exit_when_stdout_closes`` to end the command with its own exit code."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to write to a reader that is gone
        raise BrokenPipeError(errno.EPIPE, "stdout closed")


@contextmanager
def exit_when_stdout_closes(code: int) -> Iterator[None]:
    """Write a command's output in the block; a reader that closed stdout early
    (``headroom status | head -1``) ends the command with exit ``code``, the one it was going to
    return, without a traceback (Click would exit 1, which a probe reads as a failure). As
    Python's note on SIGPIPE does: stdout goes to devnull, so the flush at exit cannot fail."""
    try:
        yield
        sys.stdout.flush()  # what is still buffered fails here, not at the interpreter's exit
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise typer.Exit(code) from None
