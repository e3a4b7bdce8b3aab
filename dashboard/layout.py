"""GPU layouts drawn to scale: where each segment of a plan sits on its GPU.

MIG instances are drawn on the memory-slice axis, the axis NVIDIA's placements use
(REFERENCE.md §1.2): ``mig_start`` is the first memory slice and the profile's memory decides the
width (a 3g on a 7-slice GPU covers 4 of 8 memory slices). Segments without a MIG slice (whole
GPU, MPS shares, time-slices) split the rest of the GPU evenly. x runs from 0 to 1 (the GPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controlplane.domain.cost import total_compute_slices

_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb", re.IGNORECASE)
_PRODUCT_GB = re.compile(r"(\d+)\s*GB", re.IGNORECASE)
_DEFAULT_MEMORY_SLICES = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}  # 7-slice parts, basic profiles
_MODE_LABEL = {"mps": "MPS", "time_sliced": "time-slice", "exclusive": "exclusive", "mig": "MIG"}


def total_memory_slices(product: str) -> int:
    return 4 if total_compute_slices(product) == 4 else 8


def memory_slices(product: str, mig_profile: str, compute_slices: int) -> int:
    """Memory slices a MIG profile occupies, from its memory relative to the product's."""
    total = total_memory_slices(product)
    match, full = _PROFILE.match(mig_profile or ""), _PRODUCT_GB.search(product)
    if match and full and int(full.group(1)) > 0:
        by_memory = round(total * int(match.group(2)) / int(full.group(1)))
        return min(total, max(1, by_memory))
    if total == 4:
        return min(4, max(1, compute_slices))
    return _DEFAULT_MEMORY_SLICES.get(compute_slices, min(8, max(1, compute_slices)))


@dataclass(frozen=True, slots=True)
class Placed:
    model: str
    mode: str
    mig_profile: str
    mig_start: int
    compute_slices: int
    gpus: int = 1  # a replica of several GPUs (tensor parallel): its GPUs, this one's index
    gpu_index: int = 0


@dataclass(frozen=True, slots=True)
class Rect:
    model: str
    x0: float
    x1: float
    label: str


def gpu_rects(product: str, segments: list[Placed]) -> list[Rect]:
    """Rectangles (fractions of the GPU) for one GPU's segments."""
    total = total_memory_slices(product)
    rects: list[Rect] = []
    slices: dict[tuple[int, str], list[Placed]] = {}
    rest: list[Placed] = []
    for seg in segments:
        if seg.compute_slices > 0 and seg.mig_profile:
            slices.setdefault((seg.mig_start, seg.mig_profile), []).append(seg)
        else:
            rest.append(seg)
    mig_end = 0.0
    for (start, profile), sharing in sorted(slices.items()):
        width = memory_slices(product, profile, sharing[0].compute_slices) / total
        x0 = start / total
        mig_end = max(mig_end, x0 + width)
        for i, seg in enumerate(sharing):
            share = f" {i + 1}/{len(sharing)}" if len(sharing) > 1 else ""
            rects.append(Rect(seg.model, x0 + width * i / len(sharing),
                              x0 + width * (i + 1) / len(sharing),
                              f"{profile} {_MODE_LABEL.get(seg.mode, seg.mode)}{share}"))
    for i, seg in enumerate(rest):
        span = (1.0 - mig_end) / len(rest)
        if seg.gpus > 1:
            label = f"GPU {seg.gpu_index + 1} of {seg.gpus} of a replica"
        elif len(rest) == 1 and not slices:
            label = "whole GPU"
        else:
            label = f"{_MODE_LABEL.get(seg.mode, seg.mode)} 1/{len(rest)}"
        rects.append(Rect(seg.model, mig_end + span * i, mig_end + span * (i + 1), label))
    return rects
