"""Single-threaded BLAS around the forecaster's many small matrix products.

OpenBLAS starts a thread per core for every product; for 4,000 x 12 matrices on a busy 2-core
machine that made one IRLS iteration ~20x slower (3.9 ms instead of 0.18 ms). The forecast job
parallelises across models with processes instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    with _controller.limit(limits=1, user_api="blas"):
        yield
