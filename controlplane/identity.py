"""The name a process goes by when nothing else names it: hostname-pid. The store's fleet lease
holder, the placement journal's writer and, without ``k8s.identity``, a Kubernetes replica's
Lease holder identity all use it, so one process shows one name everywhere."""

from __future__ import annotations

import os
import socket


def holder_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
