"""GPU catalog: memory, MIG capability and MIG profile tables (pure data, REFERENCE.md §1).

Placements are on the memory-slice axis: a profile occupies ``memory_slices`` consecutive
memory slices starting at one of ``starts``. Compute shares of MIG instances are expressed in
thousandths of the GPU, rounded down, so that a full layout never sums above 1000.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

MIB_PER_GB = 1024
#: CUDA MPS serves at most this many client processes per GPU (Volta and later); a profile
#: point's ``mps_processes`` and a node's device-plugin MPS replicas stay within it
MAX_MPS_CLIENTS = 48
#: ... and at most 16 on a GPU older than Volta (P100): the MPS guide's limits (pre-Volta MPS
#: serves 16 client contexts per device, Volta MPS 48)
PRE_VOLTA_MPS_CLIENTS = 16


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of a MIG-capable product (e.g. ``3g.40gb`` at start 0 or 4)."""

    name: str
    compute_slices: int
    memory_slices: int
    starts: tuple[int, ...]
    max_count: int
    memory_mib: int  # the name's (GB x 1024): fits count usable_memory.profile_usable_mib
    media_extension: bool = False


@dataclass(frozen=True, slots=True)
class GpuProduct:
    """A GPU model: memory, MIG geometry and an indicative on-demand price."""

    name: str
    # the name's (GB x 1024) for a MIG part, the total nvidia-smi reports for the others;
    # 0 = undisclosed. Fits count usable_memory.whole_usable_mib
    memory_mib: int
    compute_slices: int = 0  # 0 = not MIG-capable
    memory_slices: int = 0
    mig_profiles: tuple[MigProfile, ...] = ()
    aliases: tuple[str, ...] = ()
    price_per_gpu_hour: float = 0.0
    #: PCI device ids as mig-parted's ``device-filter`` spells them (e.g. ``0x20B210DE``)
    pci_device_ids: tuple[str, ...] = ()
    #: CUDA MPS clients a whole GPU of this product serves
    mps_clients: int = MAX_MPS_CLIENTS

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    def profile(self, name: str) -> MigProfile | None:
        """The MIG profile called ``name`` (exact NVIDIA spelling), or None."""
        for p in self.mig_profiles:
            if p.name == name:
                return p
        return None

    def standard_profile(self, compute_slices: int) -> MigProfile | None:
        """The basic (single memory width, no media extension) profile of a compute size."""
        for p in self.mig_profiles:
            if p.compute_slices == compute_slices and not p.media_extension:
                return p
        return None

    def mig_milli(self, compute_slices: int) -> int:
        """Compute share of an instance of ``compute_slices`` in thousandths (rounded down)."""
        if self.compute_slices <= 0:
            return 0
        return compute_slices * 1000 // self.compute_slices


def _seven_slice(memory_gb: int, names: tuple[str, str, str, str, str, str]) -> tuple[
        MigProfile, ...]:
    """Profiles of an A100/H100/H200/B200-class part: 7 compute and 8 memory slices.

    ``names`` = (1g, 1g double-memory, 2g, 3g, 4g, 7g) profile names.
    """
    per_slice = memory_gb * MIB_PER_GB // 8
    one, one_wide, two, three, four, seven = names
    return (
        MigProfile(one, 1, 1, (0, 1, 2, 3, 4, 5, 6), 7, per_slice),
        MigProfile(one + "+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), 1, per_slice, media_extension=True),
        MigProfile(one_wide, 1, 2, (0, 2, 4, 6), 4, 2 * per_slice),
        MigProfile(two, 2, 2, (0, 2, 4), 3, 2 * per_slice),
        MigProfile(three, 3, 4, (0, 4), 2, 4 * per_slice),
        MigProfile(four, 4, 4, (0,), 1, 4 * per_slice),
        MigProfile(seven, 7, 8, (0,), 1, 8 * per_slice),
    )


_A30_SLICE_MIB = 6 * MIB_PER_GB
_A30_PROFILES = (
    MigProfile("1g.6gb", 1, 1, (0, 1, 2, 3), 4, _A30_SLICE_MIB),
    MigProfile("1g.6gb+me", 1, 1, (0, 1, 2, 3), 1, _A30_SLICE_MIB, media_extension=True),
    MigProfile("2g.12gb", 2, 2, (0, 2), 2, 2 * _A30_SLICE_MIB),
    MigProfile("2g.12gb+me", 2, 2, (0, 2), 1, 2 * _A30_SLICE_MIB, media_extension=True),
    MigProfile("4g.24gb", 4, 4, (0,), 1, 4 * _A30_SLICE_MIB),
)


def _mig(name: str, memory_gb: int, names: tuple[str, str, str, str, str, str],
         aliases: tuple[str, ...], price: float, pci_ids: tuple[str, ...]) -> GpuProduct:
    return GpuProduct(name, memory_gb * MIB_PER_GB, 7, 8, _seven_slice(memory_gb, names),
                      aliases, price, pci_ids)


# PCI device ids of mig-parted's default device filters (REFERENCE.md §1.7); its A100-80GB and
# H100-80GB share one filter (same profile names), split here by family (20xx A100, 23xx H100).


PRODUCTS: tuple[GpuProduct, ...] = (
    _mig("A100-40GB", 40, ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
         ("A100", "A100-SXM4-40GB", "A100-PCIE-40GB", "NVIDIA-A100-SXM4-40GB"), 3.67,
         ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE")),
    _mig("A100-80GB", 80, ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
         ("A100-SXM4-80GB", "A100-PCIE-80GB", "A100-80GB-PCIE", "NVIDIA-A100-SXM4-80GB"), 5.07,
         ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE")),
    GpuProduct("A30", 24 * MIB_PER_GB, 4, 4, _A30_PROFILES, ("A30-24GB", "NVIDIA-A30"), 1.5,
               ("0x20B710DE",)),
    _mig("H100-80GB", 80, ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
         ("H100", "H100-SXM5-80GB", "H100-PCIE-80GB", "NVIDIA-H100-80GB-HBM3"), 6.9,
         ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE")),
    _mig("H100-94GB", 94, ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
         ("H100-NVL", "H100-94GB-NVL", "NVIDIA-H100-NVL"), 7.5, ("0x232110DE", "0x233A10DE")),
    # the H100 of a GH200 Grace Hopper Superchip with 96 GB of HBM3: NVML names it by the
    # superchip's LPDDR5X ("NVIDIA GH200 480GB", also 120GB); the 144 GB HBM3e GH200 is another
    # product, not in the catalog
    _mig("H100-96GB", 96, ("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
         ("GH200-96GB", "NVIDIA-GH200-480GB", "NVIDIA-GH200-120GB"), 0.0, ()),
    _mig("H200-141GB", 141, ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
         ("H200", "H200-SXM-141GB", "H200-NVL", "NVIDIA-H200"), 5.41,
         ("0x233510DE", "0x233B10DE")),
    _mig("B200", 180, ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
         ("B200-180GB", "NVIDIA-B200"), 8.0, ("0x290110DE",)),
    # L4, L40S, A10, T4: the total nvidia-smi reports (decimal GB: an L4's "24 GB" is 23,034
    # MiB), not GB x 1024, which would count 1.5-2 GiB the GPU does not have
    GpuProduct("L4", 23034, aliases=("NVIDIA-L4", "L4-24GB"), price_per_gpu_hour=0.8),
    GpuProduct("L40S", 46068, aliases=("NVIDIA-L40S", "L40S-48GB"),
               price_per_gpu_hour=1.86),
    GpuProduct("A10", 23028, aliases=("NVIDIA-A10", "A10-24GB"), price_per_gpu_hour=1.0),
    GpuProduct("A10G", 23028, aliases=("NVIDIA-A10G", "A10G-24GB"), price_per_gpu_hour=1.006),
    GpuProduct("T4", 15360, aliases=("Tesla-T4", "NVIDIA-T4", "T4-16GB"), price_per_gpu_hour=0.35),
    GpuProduct("V100-16GB", 16 * MIB_PER_GB, aliases=("V100M16", "V100-SXM2-16GB", "V100"),
               price_per_gpu_hour=2.48),
    GpuProduct("V100-32GB", 32 * MIB_PER_GB, aliases=("V100M32", "V100-SXM2-32GB"),
               price_per_gpu_hour=3.06),
    # Products of the Alibaba openb trace (cluster-trace-gpu-v2023); G1-G3 are undisclosed.
    GpuProduct("P100", 16 * MIB_PER_GB, aliases=("Tesla-P100", "P100-16GB"),
               price_per_gpu_hour=1.46, mps_clients=PRE_VOLTA_MPS_CLIENTS),
    GpuProduct("G1", 0),
    GpuProduct("G2", 0),
    GpuProduct("G3", 0),
)

_BY_KEY: dict[str, GpuProduct] = {}
for _p in PRODUCTS:
    for _key in (_p.name, *_p.aliases):
        _BY_KEY[_key.lower()] = _p


#: GPU families a GFD label names by a word of its own (``NVIDIA-A100-80GB-PCIe``: A100)
_FAMILIES = ("A100", "H100", "H200", "B200", "L40S", "L4", "T4", "A10G", "A10", "A30", "V100",
             "P100")


def lookup(product: str, memory_mib: int = 0) -> GpuProduct | None:
    """The catalog entry for a product name or alias (case-insensitive), or for a GPU Feature
    Discovery ``nvidia.com/gpu.product`` label of one (``gfd_label_product``); None when it
    names none. ``memory_mib``: what the GPU reports, for a label that states no size."""
    found = _BY_KEY.get(product.strip().lower())
    return found if found is not None else gfd_label_product(product.strip(), memory_mib)


def gfd_label_base(label: str) -> str:
    """A GFD product label without what GFD appends to it: ``-SHARED`` on a shared GPU (MPS or
    time-slicing) and ``-MIG-<profile>`` under MIG strategy ``single`` (REFERENCE.md §3)."""
    return label.removesuffix("-SHARED").split("-MIG-", 1)[0]


@lru_cache(maxsize=256)
def gfd_label_product(label: str, memory_mib: int = 0) -> GpuProduct | None:
    """The catalog product a GFD label names (the NVML device name, spaces as dashes:
    ``NVIDIA-A100-80GB-PCIe``, ``Tesla-V100-SXM2-16GB``, ``NVIDIA-L4-SHARED``): its base, with
    or without the vendor word, as a name or alias; else its family word with the size it
    states (``A100`` + ``80GB``). A stated size the catalog does not hold for the family names
    another GPU (None); without one, the size of ``memory_mib`` (the node's report) or the
    family's own entry."""
    base = gfd_label_base(label)
    for candidate in (base, base.removeprefix("NVIDIA-").removeprefix("Tesla-")):
        found = _BY_KEY.get(candidate.lower())
        if found is not None:
            return found
    words = base.upper().replace("_", "-").split("-")
    family = next((f for f in _FAMILIES if f in words), None)
    if family is None:
        return None
    stated = next((w for w in words if w.endswith("GB") and w[:-2].isdigit()), None)
    if stated is not None:
        return _BY_KEY.get(f"{family}-{stated}".lower())
    reported = _BY_KEY.get(f"{family}-{round(memory_mib / MIB_PER_GB)}gb".lower())
    return reported if memory_mib > 0 and reported is not None else _BY_KEY.get(family.lower())


def known_product(product: str) -> str:
    """The catalog's name of ``product`` (an alias or a GFD label, ``lookup``) when the catalog
    knows it with its memory (so replicas can fit), so that every pool and profile point of one
    product spells it alike; else a ValueError listing the products it knows (a settings or
    models-file validator's message)."""
    entry = lookup(product)
    if entry is None or entry.memory_mib <= 0:
        known = ", ".join(p.name for p in PRODUCTS if p.memory_mib > 0)
        raise ValueError(f"unknown GPU product {product!r}; known: {known} "
                         "(or their aliases or GFD labels, scheduler/domain/catalog.py)")
    return entry.name
