"""MIG layouts of a node as the GPU Operator's MIG manager sees them (pure values).

A node layout is a list of device groups, each one mig-parted entry (REFERENCE.md §1.7):
``{devices: all | [0, 1], mig-enabled: bool, mig-devices: {profile: count}}``. A layout has a
deterministic config name, used as the value of the ``nvidia.com/mig.config`` node label.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

from controlplane.domain.labels import is_label_value
from scheduler.domain.catalog import PRODUCTS, lookup
from scheduler.domain.mig import solve_layout

CONFIG_PREFIX = "headroom-"
ALL_DISABLED = "all-disabled"
# mig-parted's "all-balanced" per memory class (REFERENCE.md §1.7).
_BALANCED = {
    "A100-40GB": ("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"),
    "A100-80GB": ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"),
    "H100-80GB": ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"),
    "H100-94GB": ("3g.47gb", "2g.24gb", "1g.12gb", "1g.12gb"),
    "H200-141GB": ("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"),
    "B200": ("3g.90gb", "2g.45gb", "1g.23gb", "1g.23gb"),
    "A30": ("2g.12gb", "1g.6gb", "1g.6gb"),
}


class InvalidLayout(ValueError):
    """A layout the product cannot hold; the message names the product and profiles."""


def _order(profile: str) -> tuple[int, str]:
    size = profile.split("g.", 1)[0]
    return (-int(size) if size.isdigit() else 0, profile)


@dataclass(frozen=True, slots=True)
class DeviceGroupLayout:
    """One mig-parted entry: the same MIG instances on each GPU of ``devices``."""

    devices: tuple[int, ...] = ()  # GPU indices; () = all GPUs of the node
    profiles: tuple[str, ...] = ()  # instances per GPU, e.g. ("3g.40gb", "1g.10gb", "1g.10gb")
    mig_enabled: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", tuple(sorted(self.profiles, key=_order)))
        object.__setattr__(self, "devices", tuple(sorted(set(self.devices))))

    def applies_to(self, gpu_index: int) -> bool:
        return not self.devices or gpu_index in self.devices

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(self.profiles).items(), key=lambda kv: _order(kv[0])))

    def describe(self) -> str:
        if not self.mig_enabled:
            return "mig off"
        counts = self.counts()
        return " + ".join(f"{n} x {p}" if n > 1 else p for p, n in counts.items()) or "mig on"


@dataclass(frozen=True, slots=True)
class NodeMigLayout:
    product: str
    groups: tuple[DeviceGroupLayout, ...]

    def profiles_of(self, gpu_index: int) -> tuple[str, ...]:
        group = next((g for g in self.groups if g.applies_to(gpu_index)), None)
        return group.profiles if group is not None and group.mig_enabled else ()

    def mig_enabled_on(self, gpu_index: int) -> bool:
        group = next((g for g in self.groups if g.applies_to(gpu_index)), None)
        return group is not None and group.mig_enabled

    def is_mig_enabled(self) -> bool:
        return any(g.mig_enabled for g in self.groups)

    def instance_count(self) -> int:
        return sum(len(g.profiles) for g in self.groups if g.mig_enabled)

    def describe(self) -> str:
        parts = [g.describe() if not g.devices else f"gpus {list(g.devices)}: {g.describe()}"
                 for g in self.groups]
        return "; ".join(parts) or "mig off"


def uniform(product: str, profiles: tuple[str, ...]) -> NodeMigLayout:
    """Every GPU of the node with the same instances."""
    return NodeMigLayout(product, (DeviceGroupLayout((), profiles, True),))


def layout_problems(layout: NodeMigLayout) -> list[str]:
    """Why the product cannot hold ``layout`` (empty when it can)."""
    product = lookup(layout.product)
    if product is None:
        return [f"unknown GPU product {layout.product!r}"]
    problems = []
    for group in layout.groups:
        if not group.mig_enabled:
            continue
        if not product.mig_capable:
            problems.append(f"{product.name} is not MIG-capable")
            continue
        profiles = [product.profile(p) for p in group.profiles]
        unknown = [name for name, p in zip(group.profiles, profiles, strict=True) if p is None]
        if unknown:
            problems.append(f"{product.name} has no MIG profile {', '.join(unknown)}")
        elif solve_layout(product, [p for p in profiles if p is not None]) is None:
            problems.append(f"{group.describe()} is not a valid MIG geometry on {product.name}")
    return problems


def config_name(layout: NodeMigLayout) -> str:
    """Deterministic mig-parted config name; readable when short, hashed otherwise."""
    if all(not g.mig_enabled for g in layout.groups):
        return ALL_DISABLED
    if len(layout.groups) == 1 and not layout.groups[0].devices:
        counts = layout.groups[0].counts()
        readable = CONFIG_PREFIX + "-".join(f"{n}x{p}" for p, n in counts.items())
        if is_label_value(readable):
            return readable
    digest = hashlib.sha1(repr(layout.groups).encode()).hexdigest()[:12]
    return f"{CONFIG_PREFIX}mig-{digest}"


def mig_parted_entries(layout: NodeMigLayout) -> list[dict[str, object]]:
    """The ``mig-configs.<name>`` list for mig-parted's ``config.yaml``."""
    entries: list[dict[str, object]] = []
    for group in layout.groups:
        entry: dict[str, object] = {"devices": list(group.devices) if group.devices else "all",
                                    "mig-enabled": group.mig_enabled}
        if group.mig_enabled:
            entry["mig-devices"] = group.counts()
        entries.append(entry)
    return entries


def _filter_matches(product: str, device_filter: object) -> bool:
    """Whether mig-parted's ``device-filter`` (a PCI device id or a list of them; absent =
    every GPU) takes in ``product``'s GPUs (REFERENCE.md §1.7)."""
    if device_filter is None:
        return True
    wanted = [device_filter] if isinstance(device_filter, str) else device_filter
    if not isinstance(wanted, list):
        return False
    catalog = lookup(product)
    ids = {i.lower() for i in catalog.pci_device_ids} if catalog is not None else set()
    return any(str(w).strip().lower() in ids for w in wanted)


def layout_from_entries(product: str, entries: list[dict[str, object]]) -> NodeMigLayout:
    """Parse a mig-parted config entry list back into a layout (inverse of the above); entries
    whose ``device-filter`` names other GPUs than ``product``'s are not the node's."""
    groups = []
    for entry in entries:
        if not _filter_matches(product, entry.get("device-filter")):
            continue
        devices = entry.get("devices", "all")
        indices = tuple(int(d) for d in devices) if isinstance(devices, list) else ()
        counts = entry.get("mig-devices")
        profiles = tuple(str(p) for p, n in counts.items() for _ in range(int(str(n)))
                         ) if isinstance(counts, dict) else ()
        groups.append(DeviceGroupLayout(indices, profiles, bool(entry.get("mig-enabled", True))))
    return NodeMigLayout(product, tuple(groups))


def _ids(product: str) -> tuple[str, ...]:
    catalog = lookup(product)
    return catalog.pci_device_ids if catalog is not None else ()


def scoped_entries(layout: NodeMigLayout) -> list[dict[str, object]]:
    """``mig_parted_entries`` with a ``device-filter`` naming the product's PCI device ids (as
    mig-parted's own defaults do), so the config lays out only that product's GPUs; unscoped
    when the catalog knows no ids for the product."""
    ids = _ids(layout.product)
    entries = mig_parted_entries(layout)
    return [{"device-filter": list(ids), **entry} for entry in entries] if ids else entries


def with_product_entries(entries: list[dict[str, object]],
                         layout: NodeMigLayout) -> list[dict[str, object]]:
    """One config's ``entries`` (possibly for several products) with those that apply to
    ``layout.product``'s GPUs replaced by ``scoped_entries(layout)``: other products' entries
    stay; one that also applied to other GPUs (no filter, or a filter naming several families)
    stays for those GPUs only. Unchanged when the product's entries already are these."""
    product, scoped = layout.product, scoped_entries(layout)
    if [e for e in entries if _filter_matches(product, e.get("device-filter"))] == scoped:
        return entries
    mine = {i.lower() for i in _ids(product)}
    if not mine:
        return scoped
    others = [i for p in PRODUCTS for i in p.pci_device_ids if i.lower() not in mine]
    kept: list[dict[str, object]] = []
    for entry in entries:
        wanted = entry.get("device-filter")
        if not _filter_matches(product, wanted):
            kept.append(entry)
            continue
        listed = [wanted] if isinstance(wanted, str) else wanted
        rest = others if wanted is None else [
            str(i) for i in listed if str(i).strip().lower() not in mine] if isinstance(
            listed, list) else []
        if rest:
            kept.append({**entry, "device-filter": rest})
    return kept + scoped


def builtin_layout(product: str, name: str) -> NodeMigLayout | None:
    """Layouts of mig-parted's default configs: all-disabled, all-enabled, all-balanced and
    all-<profile> (as many instances of the profile as fit)."""
    if name == ALL_DISABLED:
        return NodeMigLayout(product, (DeviceGroupLayout((), (), False),))
    if name == "all-enabled":
        return uniform(product, ())
    catalog = lookup(product)
    if name == "all-balanced" and catalog is not None and catalog.name in _BALANCED:
        return uniform(product, _BALANCED[catalog.name])
    if name.startswith("all-") and catalog is not None:
        profile = catalog.profile(name[4:])
        if profile is not None:
            return uniform(product, (profile.name,) * profile.max_count)
    return None
