"""Run a child process in the foreground (``headroom dashboard`` runs Streamlit this way) so
that stopping Headroom stops the child: SIGTERM or SIGINT to Headroom is passed on and Headroom
waits for the child's exit code. Without this a SIGTERM (a supervisor's stop, ``kill``) ended
Headroom alone and left Streamlit serving, orphaned."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_in_foreground(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``command`` until it exits, forwarding SIGINT and SIGTERM; its exit code.

    The child gets its own session, so a terminal's Ctrl-C reaches it once, through us."""
    children: list[subprocess.Popen[bytes]] = []
    stop_with: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        stop_with.append(signum)
        if children and children[0].poll() is None:
            children[0].send_signal(signum)

    # handlers first: a signal that arrives while the child starts is passed on, not lost
    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    try:
        children.append(subprocess.Popen(list(command), env=dict(env), start_new_session=True))
        if stop_with:
            children[0].send_signal(stop_with[0])
        return children[0].wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
