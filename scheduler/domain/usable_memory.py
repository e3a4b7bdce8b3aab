"""GPU memory a placement may count on: what CUDA can use of a MIG profile or of a whole GPU.

The one source of truth for memory fits (PlanFleet, the online Place API, ``models import``).
Profile names overstate usable memory (REFERENCE.md §1.3, §11.5: 1g.5gb ≈ 4.75 GiB, 7g.141gb
= 140 GiB), and ``MigProfile.memory_mib`` / ``GpuProduct.memory_mib`` are the names' figures
(GB x 1024; a GPU without MIG: the total nvidia-smi reports), so no fit is ever decided on them
directly.

Measured facts (REFERENCE.md §1.3, -lgip / nvidia-smi output) are in ``MEASURED_MIB``. Every
other figure is DERIVED: the profile's (or whole GPU's) name memory times a usable/name ratio
measured in its family (rounded down). Small instances lose the largest share to the driver
(H200 1g.18gb keeps 0.908 of its name, 2g.35gb 0.929, 7g.141gb 0.993; A100-40GB 1g.5gb 0.95,
3g.20gb 0.981), so an instance holding a fraction f of the GPU's memory slices keeps at least
the ratio measured at the largest fraction <= f (the smallest across the family's products at
that fraction): a safe bound that does not charge a large instance a small one's loss. Ampere
(A100-40GB, A100-80GB, A30): 0.95 up to half the slices, then 0.981 (a whole A100-80GB 80,384
MiB). Hopper (H100-80GB, H100-94GB, H200) and B200 (§1.3: assume Hopper geometry): 0.9078 for
1/8, 0.9286 from 1/4, 0.9906 whole. A GPU without MIG (L4, T4, ...), of no measured family and
always used whole: the smallest ratio measured for a whole GPU, 0.9906 (H100-80GB 7g.80gb;
H100-94GB 7g.94gb).

A whole GPU counts on its full-memory profile's figure (7g.80gb = 79.25 GiB for an H100-80GB).
A GPU of the inventory reports its total (GFD ``nvidia.com/gpu.memory``, e.g. 81559 MiB for an
H100-80GB), which is more than CUDA can use: Place counts on the smaller of that report and
the catalog's usable figure (``reported_usable_mib``); a product the catalog does not know
keeps the node's report, the only figure there is.
"""

from __future__ import annotations

from fractions import Fraction

from scheduler.domain.catalog import PRODUCTS, GpuProduct, MigProfile

#: Usable MiB measured per (product, profile), REFERENCE.md §1.3 (GiB x 1024, rounded down).
MEASURED_MIB: dict[tuple[str, str], int] = {
    ("A100-40GB", "1g.5gb"): 4864,  # ≈ 4.75 GiB
    ("A100-40GB", "3g.20gb"): 20096,  # "shows 20096-20224 MiB": the low end
    ("H100-80GB", "7g.80gb"): 81152,  # 79.25 GiB
    ("H100-94GB", "7g.94gb"): 95354,  # 93.12 GiB
    ("H200-141GB", "1g.18gb"): 16384,  # 16.00 GiB
    ("H200-141GB", "2g.35gb"): 33280,  # 32.50 GiB
    ("H200-141GB", "7g.141gb"): 143360,  # 140.00 GiB
}

#: Product families whose measured ratios stand in for each other's unmeasured profiles.
FAMILY: dict[str, str] = {
    "A100-40GB": "ampere", "A100-80GB": "ampere", "A30": "ampere",
    "H100-80GB": "hopper", "H100-94GB": "hopper", "H100-96GB": "hopper", "H200-141GB": "hopper",
    "B200": "hopper",
}


def _ratios() -> dict[tuple[str, Fraction], Fraction]:
    """The smallest measured usable/name ratio per (family, fraction of the GPU's memory
    slices), and of a whole GPU (any family) under family ``""``."""
    by_name = {p.name: p for p in PRODUCTS}
    ratios: dict[tuple[str, Fraction], Fraction] = {}
    for (product, profile), usable in MEASURED_MIB.items():
        prof = by_name[product].profile(profile)
        assert prof is not None, (product, profile)
        ratio = Fraction(usable, prof.memory_mib)
        fraction = Fraction(prof.memory_slices, by_name[product].memory_slices)
        for family in (FAMILY[product], *([""] if fraction == 1 else [])):
            ratios[family, fraction] = min(ratios.get((family, fraction), ratio), ratio)
    return ratios


_RATIO = _ratios()


def _derived(product: GpuProduct, name_mib: int, fraction: Fraction) -> int:
    """``name_mib`` x the ratio measured at the largest fraction <= ``fraction`` in the
    product's family (a product of no family is used whole: the whole-GPU ratio)."""
    family = FAMILY.get(product.name)
    if family is None:
        return int(_RATIO["", Fraction(1)] * name_mib)  # Fraction -> int rounds down
    measured = {f: r for (fam, f), r in _RATIO.items() if fam == family}
    return int(measured[max((f for f in measured if f <= fraction), default=min(measured))]
               * name_mib)


def profile_usable_mib(product: GpuProduct, prof: MigProfile) -> int:
    """Memory CUDA can use in an instance of ``prof`` on ``product`` (a ``+me`` variant has
    its base profile's memory)."""
    base = prof.name.removesuffix("+me")
    measured = MEASURED_MIB.get((product.name, base))
    if measured is not None:
        return measured
    return _derived(product, prof.memory_mib,
                    Fraction(prof.memory_slices, product.memory_slices or 1))


def whole_usable_mib(product: GpuProduct) -> int:
    """Memory CUDA can use of a whole ``product`` (0 when the catalog does not know it)."""
    if product.memory_mib <= 0:
        return 0
    full = [p for p in product.mig_profiles if p.memory_slices == product.memory_slices]
    if full:
        return profile_usable_mib(product, full[0])
    return _derived(product, product.memory_mib, Fraction(1))


def reported_usable_mib(product: GpuProduct | None, reported_mib: int) -> int:
    """Memory Place counts on for a GPU of ``product`` whose node reports ``reported_mib`` (0 =
    not reported): the smaller of the report and the catalog's usable figure; the report alone
    for a product the catalog does not know; 0 when neither is known."""
    usable = whole_usable_mib(product) if product is not None else 0
    if reported_mib <= 0:
        return usable
    return min(reported_mib, usable) if usable > 0 else reported_mib


def segment_usable_mib(product: GpuProduct, compute_slices: int) -> int | None:
    """Memory CUDA can use in a segment of ``compute_slices`` (its basic MIG profile; 0 = a
    whole GPU) of ``product``; None when the product offers no such MIG size."""
    if compute_slices == 0:
        return whole_usable_mib(product)
    prof = product.standard_profile(compute_slices)
    return profile_usable_mib(product, prof) if prof is not None else None
