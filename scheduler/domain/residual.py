"""What is left of a GPU's free milli once the common share sizes have filled it.

FGD's fragment (``scoring``) counts the free milli of a GPU that each shape cannot use, weighted
by how often the shape arrives. It does not see that some holes will be filled anyway: the
common sizes arrive far more often than holes open, so a 350-milli hole is soon closed by a
320 (30 left), while a 120-milli hole waits for a rare 110. The *residual* of a hole of ``a``
milli is ``a`` minus the largest sum of common share sizes (any number of each) that fits in
``a``; an idle GPU has none (it is not a hole). A share placed on a GPU changes that GPU's
residual; the placer adds the change to its score, so of two GPUs it prefers the one whose
hole the common sizes close best afterwards (650 + 320 rather than 650 + 230 when 230s are
also common; the 230 then joins a 470 + 230 that a further 230 or 220 closes).

"Common" is learned online from the arrival stream: share sizes whose share of the arrived
share requests is at least ``min_share`` (``ScoreWeights.fill_share``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.domain.model import WHOLE_GPU_MILLI

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def common_sizes(milli: IntArray, weight: FloatArray, is_share: npt.NDArray[np.bool_],
                 min_share: float) -> list[int]:
    """Share sizes (milli) whose frequency among the share shapes is at least ``min_share``."""
    total = float(weight[is_share].sum())
    if total <= 0.0:
        return []
    return sorted({int(m) for m, w, s in zip(milli.tolist(), weight.tolist(), is_share.tolist(),
                                             strict=True) if s and w / total >= min_share})


def residual_milli(sizes: list[int]) -> IntArray:
    """Per free milli ``a`` (0..1000, plus a last entry 0 for index -1, a GPU slot without a
    GPU): ``a`` minus the largest sum of ``sizes`` (any number of each) that is <= ``a``; 0 for
    an idle GPU (``a`` = 1000)."""
    width = WHOLE_GPU_MILLI + 1
    mask = (1 << width) - 1
    reach = 1  # bit v set: some multiset of sizes sums to exactly v
    for size in sizes:
        if size <= 0:
            continue
        step = size
        while step < width:  # unbounded copies: shift by size, 2 size, 4 size, ...
            reach |= (reach << step) & mask
            step *= 2
    bits = np.array([(reach >> v) & 1 for v in range(width)], dtype=bool)
    best = np.maximum.accumulate(np.where(bits, np.arange(width), 0))
    out = np.zeros(width + 1, dtype=np.int64)
    out[:width] = np.arange(width) - best
    out[WHOLE_GPU_MILLI] = 0
    return out
