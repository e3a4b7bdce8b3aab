"""MIG geometry on the memory-slice axis (REFERENCE.md §1.2 and §1.4).

A layout is valid when every instance starts at an allowed start of its profile, no two
instances overlap on the memory axis, their compute slices sum to at most the GPU's compute
slices and no profile exceeds its maximum count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations_with_replacement

from scheduler.domain.catalog import GpuProduct, MigProfile


@dataclass(frozen=True, slots=True)
class MigInstance:
    """A GPU instance of ``profile`` at memory-slice ``start``."""

    profile: MigProfile
    start: int

    @property
    def span(self) -> range:
        return range(self.start, self.start + self.profile.memory_slices)


def layout_violations(product: GpuProduct, instances: Sequence[MigInstance]) -> list[str]:
    """Reasons why ``instances`` is not a valid layout of ``product`` (empty when valid)."""
    problems: list[str] = []
    if not product.mig_capable:
        return [f"{product.name} is not MIG-capable"] if instances else []
    used: dict[int, int] = {}
    counts: dict[str, int] = {}
    compute = 0
    for k, inst in enumerate(instances):
        prof = inst.profile
        if product.profile(prof.name) != prof:
            problems.append(f"instance {k}: {prof.name} is not a {product.name} profile")
        if inst.start not in prof.starts:
            problems.append(f"instance {k}: {prof.name} cannot start at {inst.start}")
        for j in inst.span:
            if j >= product.memory_slices:
                problems.append(f"instance {k}: memory slice {j} beyond {product.memory_slices}")
            elif j in used:
                problems.append(f"instance {k}: memory slice {j} overlaps instance {used[j]}")
            else:
                used[j] = k
        counts[prof.name] = counts.get(prof.name, 0) + 1
        compute += prof.compute_slices
    if compute > product.compute_slices:
        problems.append(f"{compute} compute slices > {product.compute_slices}")
    for name, n in counts.items():
        known = product.profile(name)
        if known is not None and n > known.max_count:
            problems.append(f"{n} x {name} > max {known.max_count}")
    if sum(1 for i in instances if i.profile.media_extension) > 1:
        problems.append("more than one +me instance")
    return problems


def is_valid_layout(product: GpuProduct, instances: Sequence[MigInstance]) -> bool:
    return not layout_violations(product, instances)


def occupied_mask(instances: Iterable[MigInstance]) -> int:
    """Bit mask of used memory slices."""
    mask = 0
    for inst in instances:
        for j in inst.span:
            mask |= 1 << j
    return mask


def free_start(product: GpuProduct, instances: Sequence[MigInstance],
               profile: MigProfile) -> int | None:
    """A start where ``profile`` can be added to ``instances`` keeping the layout valid.

    Prefers the start that keeps the most valuable room free: the highest allowed start for
    small profiles (so 3g/4g keep their low starts) except 3g, which goes to 4 when it can
    (REFERENCE.md §1.4: 3g at 0 blocks the 7-slice mixes).
    """
    compute = sum(i.profile.compute_slices for i in instances) + profile.compute_slices
    if compute > product.compute_slices:
        return None
    same = sum(1 for i in instances if i.profile.name == profile.name)
    if same >= profile.max_count:
        return None
    if profile.media_extension and any(i.profile.media_extension for i in instances):
        return None
    mask = occupied_mask(instances)
    best: int | None = None
    best_room = -1
    for start in profile.starts:
        span = (((1 << profile.memory_slices) - 1) << start)
        if start + profile.memory_slices > product.memory_slices or mask & span:
            continue
        room = _remaining_room(product, mask | span, compute)
        if room > best_room:
            best, best_room = start, room
    return best


def _remaining_room(product: GpuProduct, mask: int, compute_used: int) -> int:
    """How much compute can still be added to a layout with memory ``mask`` (greedy bound)."""
    left = product.compute_slices - compute_used
    room = 0
    for prof in sorted(product.mig_profiles, key=lambda p: -p.compute_slices):
        if prof.media_extension or prof.memory_slices > 2 * prof.compute_slices:
            continue
        for start in prof.starts:
            span = ((1 << prof.memory_slices) - 1) << start
            if (start + prof.memory_slices <= product.memory_slices and not mask & span
                    and prof.compute_slices <= left):
                mask |= span
                left -= prof.compute_slices
                room += prof.compute_slices
    return room


def solve_layout(product: GpuProduct, profiles: Sequence[MigProfile]) -> list[int] | None:
    """Memory-slice starts for instances of ``profiles`` (same order), or None if impossible.

    Exhaustive backtracking over allowed starts, widest instance first; deterministic.
    """
    if sum(p.compute_slices for p in profiles) > product.compute_slices:
        return None
    order = sorted(range(len(profiles)), key=lambda i: (-profiles[i].memory_slices, i))
    starts = [0] * len(profiles)

    def place(k: int, mask: int) -> bool:
        if k == len(order):
            return True
        prof = profiles[order[k]]
        for start in sorted(prof.starts, reverse=prof.compute_slices == 3):
            span = ((1 << prof.memory_slices) - 1) << start
            if start + prof.memory_slices <= product.memory_slices and not mask & span:
                starts[order[k]] = start
                if place(k + 1, mask | span):
                    return True
        return False

    if not place(0, 0):
        return None
    layout = [MigInstance(p, s) for p, s in zip(profiles, starts, strict=True)]
    return starts if is_valid_layout(product, layout) else None


def valid_size_mixes(product: GpuProduct) -> tuple[tuple[int, ...], ...]:
    """Every multiset of basic instance sizes (descending tuples) with a valid layout; 37 on
    7-slice GPUs (REFERENCE.md §1.4), 9 on A30."""
    sizes = sorted({p.compute_slices for p in product.mig_profiles if not p.media_extension})
    mixes: set[tuple[int, ...]] = set()
    for n in range(1, product.compute_slices + 1):
        for combo in combinations_with_replacement(sizes, n):
            if sum(combo) > product.compute_slices:
                continue
            profiles = [product.standard_profile(g) for g in combo]
            basic = [p for p in profiles if p is not None]
            if len(basic) == len(combo) and solve_layout(product, basic) is not None:
                mixes.add(tuple(sorted(combo, reverse=True)))
    return tuple(sorted(mixes))
