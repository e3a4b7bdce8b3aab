"""The `headroom` CLI forked from a warm interpreter, so a test's short commands skip ~1.3 s of
interpreter start and imports each.

``WARM_HEADROOM`` is a drop-in for ``HEADROOM`` in ``subprocess.run``: a small client process
(``python -S``, stdlib only) hands its argv, environment, working directory and its stdin,
stdout and stderr file descriptors to a server over a Unix socket. The server (one per pytest
process, started by ``tests/conftest.py``) imported the CLI's dependencies once; for each client
it forks, and the fork runs ``controlplane.cli.main`` on the client's own descriptors, so pipes,
closed pipes and files behave as for a fresh process. The client exits with the command's exit
code (or dies of its signal). SIGINT and SIGTERM sent to the client are passed on; if the client
dies (``subprocess.run``'s timeout kills it), the command is killed. Without a server (the
variable unset, or it cannot be reached) the client execs the real command: same result, slower.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from pathlib import Path

#: the environment variable naming the server's socket (not HEADROOM_*: ``_env`` keeps it)
SOCKET_VARIABLE = "WARM_CLI_SOCKET"
#: what the server imports before it forks: what `status`, `models` and `db` import when they run
#: (gRPC is left out: its core is not safe to fork once imported)
PRELOAD = ("controlplane.cli", "numpy", "pandas", "sqlalchemy", "sqlmodel", "alembic", "yaml",
           "psycopg", "prometheus_client", "controlplane.settings", "controlplane.store",
           "controlplane.cli.status", "controlplane.cli.models")

_CLIENT = r"""
import json, os, signal, socket, struct, sys
path = os.environ.get("WARM_CLI_SOCKET")
real = [sys.executable, "-c", "from controlplane.cli import main; main()", *sys.argv[1:]]
conn = socket.socket(socket.AF_UNIX)
try:
    conn.connect(path or "")
except OSError:
    os.execv(sys.executable, real)
body = json.dumps({"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}).encode()
socket.send_fds(conn, [struct.pack("!Q", len(body)) + body], [0, 1, 2])
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda number, _: conn.sendall(struct.pack("!B", number)))
reply = b""
while not reply.endswith(b"\n"):
    chunk = conn.recv(64)
    if not chunk:
        sys.exit(1)
    reply += chunk
code = int(reply)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""

#: ``[*WARM_HEADROOM, *args]`` runs ``headroom *args`` (through the server when there is one)
WARM_HEADROOM = [sys.executable, "-S", "-c", _CLIENT]


def serve(path: str) -> None:
    """Import ``PRELOAD``, listen on ``path``, fork a session per client; return when stdin
    (the pytest process's pipe) closes."""
    for name in PRELOAD:
        __import__(name)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(f"{path}.new")
    listener.listen(16)
    Path(f"{path}.new").rename(path)  # the socket appears at ``path`` once it listens
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [], 1.0)
        _reap()
        if sys.stdin in ready:
            return
        if listener in ready:
            conn, _ = listener.accept()
            if os.fork() == 0:
                try:
                    listener.close()
                    _session(conn)
                finally:
                    os._exit(0)
            conn.close()


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _session(conn: socket.socket) -> None:
    """Receive one request, fork the command, pass signals on, report its exit code."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    (size,) = struct.unpack("!Q", data[:8])
    while len(data) < 8 + size:
        data += conn.recv(1 << 20)
    request = json.loads(data[8:8 + size])
    argv: list[str] = request["argv"]
    env: dict[str, str] = request["env"]
    pid = os.fork()
    if pid == 0:
        try:
            conn.close()
            _command(argv, env, request["cwd"], fds)
        finally:
            os._exit(1)
    for fd in fds:
        os.close(fd)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            return
        if select.select([conn], [], [], 0.02)[0]:
            signals = conn.recv(64)
            for number in signals or [signal.SIGKILL]:
                os.kill(pid, number)
            if not signals:
                os.waitpid(pid, 0)
                return


def _command(argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> None:
    """Become ``headroom <argv>`` on the client's descriptors, environment and directory."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    sys.argv = ["-c", *argv]
    code = 0
    try:
        from controlplane.cli import main
        main()
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        _shutdown(0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    os._exit(_shutdown(code))


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _shutdown(code: int) -> int:
    """What the interpreter does at exit: wait for threads, run atexit, flush stdout (120 if
    that fails, as Python does)."""
    import atexit
    import threading
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    return code
