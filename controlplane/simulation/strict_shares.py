"""The GPU share a STRICT replica of a models file may take: whole GPUs, or the k/n of a GPU
that a MIG instance of its product gives (``mig_shares``, from the scheduler's catalog), within
a small tolerance for a share written short (0.14 for 1/7); ``check_strict_share`` refuses any
other share, listing the valid ones."""

from __future__ import annotations

from scheduler.domain.catalog import lookup

#: how far a STRICT share may be from k/n of a GPU and still mean that MIG instance (0.14 = 1/7)
_MIG_SHARE_TOLERANCE = 0.005


def mig_shares(gpu_product: str) -> tuple[tuple[int, int], ...]:
    """The fractional GPU shares ``(k, n)`` = k/n of a GPU that a MIG instance of the product
    gives (A100: 1/7, 2/7, 3/7, 4/7); none for a product without MIG or not in the catalog."""
    product = lookup(gpu_product)
    if product is None or not product.mig_capable:
        return ()
    slices = sorted({p.compute_slices for p in product.mig_profiles
                     if p.compute_slices < product.compute_slices})
    return tuple((k, product.compute_slices) for k in slices)


def check_strict_share(share: float, gpu_product: str) -> None:
    """A STRICT replica is a whole GPU or a MIG instance: a share must be one of the product's."""
    if share >= 1:
        return
    shares = mig_shares(gpu_product)
    if any(abs(share - k / n) <= _MIG_SHARE_TOLERANCE for k, n in shares):
        return
    if not shares:
        raise ValueError(f"a STRICT replica is whole GPUs (1, 2, ...) as {gpu_product} has no "
                         f"MIG instances, got {share}")
    valid = ", ".join(f"{k}/{n} ({k / n:.3f})" for k, n in shares)
    raise ValueError(f"a STRICT replica is whole GPUs (1, 2, ...) or a MIG instance of "
                     f"{gpu_product}: {valid} of a GPU, got {share}")
