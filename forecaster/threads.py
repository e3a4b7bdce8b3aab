"""Single-threaded BLAS (and OpenMP) around the forecaster's many small matrix products.

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


_openmp: ThreadpoolController | None = None


@contextmanager
def single_threaded_openmp() -> Iterator[None]:
    """The same for OpenMP (scikit-learn's gradient boosting in ``forecaster.boosted``). Its own
    controller, created on first use: a controller only sees the libraries loaded when it was
    made, and scikit-learn's OpenMP runtime loads with scikit-learn (two spinning OpenMP threads
    on a busy 2-core machine made a fit ~8x slower)."""
    global _openmp
    if _openmp is None:
        _openmp = ThreadpoolController()
    with _openmp.limit(limits=1, user_api="openmp"):
        yield
