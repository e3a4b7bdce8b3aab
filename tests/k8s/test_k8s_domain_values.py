"""Pure values behind Kubernetes actuation: MIG layouts and config names, device-plugin sharing
configs, the Lease decision."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.domain.lease import (
    LeaseRecord,
    LeaseTiming,
    LeaseVerdict,
    decide_lease,
    leads_until,
    released,
)
from controlplane.domain.mig_layout import (
    ALL_DISABLED,
    DeviceGroupLayout,
    NodeMigLayout,
    builtin_layout,
    config_name,
    layout_from_entries,
    layout_problems,
    mig_parted_entries,
    uniform,
    with_product_entries,
)
from controlplane.domain.models import SharingMode
from controlplane.domain.sharing_config import (
    SharingLayout,
    device_plugin_config,
    layout_from_config_name,
)
from controlplane.domain.sharing_config import config_name as sharing_config_name

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TARGET = ("1g.10gb", "3g.40gb", "1g.10gb", "2g.20gb")


def test_target_layout_has_a_readable_deterministic_config_name() -> None:
    layout = uniform("A100-80GB", TARGET)
    assert config_name(layout) == "headroom-1x3g.40gb-1x2g.20gb-2x1g.10gb"
    assert config_name(uniform("A100-80GB", tuple(reversed(TARGET)))) == config_name(layout)
    assert layout.describe() == "3g.40gb + 2g.20gb + 2 x 1g.10gb"
    assert layout.instance_count() == 4


def test_per_device_layouts_get_a_hashed_name_that_fits_a_label() -> None:
    layout = NodeMigLayout("A100-80GB", (DeviceGroupLayout((0, 1), TARGET),
                                         DeviceGroupLayout((2,), ("7g.80gb",))))
    name = config_name(layout)
    assert name.startswith("headroom-mig-") and len(name) <= 63
    assert layout.profiles_of(2) == ("7g.80gb",) and layout.profiles_of(5) == ()


def test_mig_parted_entries_round_trip() -> None:
    layout = NodeMigLayout("A100-80GB", (DeviceGroupLayout((), TARGET),))
    entries = mig_parted_entries(layout)
    assert entries == [{"devices": "all", "mig-enabled": True,
                        "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}]
    assert layout_from_entries("A100-80GB", entries) == layout


# mig-parted's default all-balanced (REFERENCE.md §1.7): one entry per GPU family, told apart by
# PCI device-id filters; a config copied from default-mig-parted-config looks like this.
DEFAULT_ALL_BALANCED: list[dict[str, object]] = [
    {"device-filter": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
     "devices": "all", "mig-enabled": True,
     "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
    {"device-filter": ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE",
                       "0x20F310DE", "0x20F510DE", "0x232410DE"],
     "devices": "all", "mig-enabled": True,
     "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
    {"device-filter": "0x233510DE", "devices": "all", "mig-enabled": True,
     "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}},
]


@pytest.mark.parametrize(("product", "profiles"), [
    ("A100-40GB", ("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb")),
    ("A100-80GB", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")),
    ("H100-80GB", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")),
    ("H200-141GB", ("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb")),
])
def test_a_mig_parted_config_applies_only_the_entries_whose_device_filter_names_the_gpu(
        product: str, profiles: tuple[str, ...]) -> None:
    layout = layout_from_entries(product, DEFAULT_ALL_BALANCED)
    assert layout.profiles_of(0) == profiles
    assert layout_problems(layout) == []


def test_a_mig_parted_entry_whose_device_filter_names_another_gpu_does_not_apply() -> None:
    layout = layout_from_entries("B200", DEFAULT_ALL_BALANCED)
    assert layout.profiles_of(0) == () and not layout.is_mig_enabled()


@pytest.mark.parametrize(("product", "profiles", "problem"), [
    ("A100-80GB", ("4g.40gb", "3g.40gb", "1g.10gb"), "not a valid MIG geometry"),
    ("A100-80GB", ("5g.50gb",), "no MIG profile 5g.50gb"),
    ("L4", ("1g.6gb",), "not MIG-capable"),
    ("Z9", ("1g.10gb",), "unknown GPU product"),
], ids=["too-many-slices", "unknown-profile", "not-mig-capable", "unknown-product"])
def test_invalid_layouts_are_named(product: str, profiles: tuple[str, ...], problem: str) -> None:
    assert any(problem in p for p in layout_problems(uniform(product, profiles)))


def test_valid_mixed_layout_has_no_problems() -> None:
    assert layout_problems(uniform("A100-80GB", TARGET)) == []
    assert layout_problems(uniform("A100-80GB", ("3g.40gb", "3g.40gb"))) == []


def test_builtin_mig_parted_configs_resolve_to_layouts() -> None:
    seven = builtin_layout("A100-80GB", "all-1g.10gb")
    assert seven is not None and seven.profiles_of(0) == ("1g.10gb",) * 7
    balanced = builtin_layout("A100-80GB", "all-balanced")
    assert balanced is not None and sorted(balanced.profiles_of(3)) == sorted(
        ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
    disabled = builtin_layout("A100-80GB", ALL_DISABLED)
    assert disabled is not None and not disabled.is_mig_enabled()
    assert config_name(disabled) == ALL_DISABLED
    assert builtin_layout("A100-80GB", "custom-thing") is None


def test_sharing_config_names_round_trip_and_validate() -> None:
    mps = SharingLayout(SharingMode.MPS, 4)
    assert sharing_config_name(mps) == "headroom-mps-4"
    assert layout_from_config_name("headroom-mps-4") == mps
    assert layout_from_config_name("headroom-time-slicing-8") == SharingLayout(
        SharingMode.TIME_SLICING, 8)
    assert layout_from_config_name("someone-else") is None
    assert SharingLayout(SharingMode.MPS, 49).problems()
    assert SharingLayout(SharingMode.TIME_SLICING, 1).problems()
    assert SharingLayout(SharingMode.MIG, 2).problems()
    assert SharingLayout(SharingMode.EXCLUSIVE).problems() == []


def test_device_plugin_config_follows_the_documented_schema() -> None:
    mps = device_plugin_config(SharingLayout(SharingMode.MPS, 4), "single")
    assert mps == {"version": "v1", "flags": {"migStrategy": "none"},
                   "sharing": {"mps": {"renameByDefault": False, "resources": [
                       {"name": "nvidia.com/gpu", "replicas": 4}]}}}
    sliced = device_plugin_config(SharingLayout(SharingMode.TIME_SLICING, 8), "none")
    assert sliced["sharing"] == {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 8}]}}
    assert "sharing" not in device_plugin_config(SharingLayout(SharingMode.EXCLUSIVE), "none")


@pytest.mark.parametrize("mig_strategy", ["mixed", "single"])
def test_an_mps_device_plugin_config_never_names_a_mig_strategy_the_plugin_refuses(
        mig_strategy: str) -> None:
    # REFERENCE.md §2.1 / §11.10: MPS runs on whole GPUs only, never with MIG. The device plugin
    # refuses to start on an MPS config with migStrategy mixed ("using --mig-strategy=mixed is
    # not supported with MPS", cmd/nvidia-device-plugin/main.go validateFlags): the node would
    # lose every GPU. Headroom's MPS configs go to MIG-off nodes only, so they say "none".
    mps = device_plugin_config(SharingLayout(SharingMode.MPS, 4), mig_strategy)
    assert mps["flags"] == {"migStrategy": "none"}
    sliced = device_plugin_config(SharingLayout(SharingMode.TIME_SLICING, 4), mig_strategy)
    assert sliced["flags"] == {"migStrategy": mig_strategy}


TIMING = LeaseTiming(lease_duration_s=15, renew_deadline_s=10)


def test_no_lease_means_create_then_the_holder_renews() -> None:
    first = decide_lease(None, None, "a", T0, TIMING)
    assert first.verdict is LeaseVerdict.CREATE and first.record is not None
    held = LeaseRecord("a", 15, T0, T0, 0, "1")
    again = decide_lease(held, first.sighting, "a", T0 + timedelta(seconds=5), TIMING)
    assert again.verdict is LeaseVerdict.RENEW
    assert again.record is not None and again.record.renew_at == T0 + timedelta(seconds=5)


def test_a_follower_takes_over_only_after_a_full_duration_of_silence() -> None:
    held = LeaseRecord("a", 15, T0, T0, 0, "7")
    seen = decide_lease(held, None, "b", T0 + timedelta(seconds=3), TIMING)
    assert seen.verdict is LeaseVerdict.FOLLOW
    early = decide_lease(held, seen.sighting, "b", T0 + timedelta(seconds=17), TIMING)
    assert early.verdict is LeaseVerdict.FOLLOW  # 14 s since b first saw this record
    late = decide_lease(held, early.sighting, "b", T0 + timedelta(seconds=18), TIMING)
    assert late.verdict is LeaseVerdict.TAKE_OVER
    assert late.record is not None and late.record.holder == "b"
    assert late.record.transitions == 1 and late.record.resource_version == "7"


def test_a_renewal_resets_the_followers_timer_even_with_skewed_clocks() -> None:
    skew = timedelta(hours=3)  # b's clock is three hours ahead; only rates matter
    held = LeaseRecord("a", 15, T0, T0, 0, "7")
    seen = decide_lease(held, None, "b", T0 + skew, TIMING)
    renewed = LeaseRecord("a", 15, T0, T0 + timedelta(seconds=10), 0, "8")
    later = decide_lease(renewed, seen.sighting, "b", T0 + skew + timedelta(seconds=20), TIMING)
    assert later.verdict is LeaseVerdict.FOLLOW


def test_a_released_lease_is_taken_at_once() -> None:
    held = LeaseRecord("a", 15, T0, T0, 2, "9")
    free = released(held, T0)
    assert free.holder == "" and free.lease_duration_s == 1
    taken = decide_lease(free, None, "b", T0 + timedelta(seconds=1), TIMING)
    assert taken.verdict is LeaseVerdict.TAKE_OVER and taken.record is not None
    assert taken.record.transitions == 3


def test_a_leader_stops_leading_before_any_follower_may_take_over() -> None:
    assert leads_until(T0, TIMING) < T0 + timedelta(seconds=TIMING.lease_duration_s)
    with pytest.raises(ValueError, match="renew_deadline_s"):
        LeaseTiming(lease_duration_s=10, renew_deadline_s=10)


def test_replacing_one_products_entries_in_a_default_config_keeps_the_other_families() -> None:
    # the default all-balanced's 80GB entry also names the H100-80GB's ids: rewritten for the
    # A100-80GB, the H100 keeps the 80GB entry and the A100-40GB and H200 theirs
    seven = uniform("A100-80GB", ("7g.80gb",))
    entries = with_product_entries(DEFAULT_ALL_BALANCED, seven)
    assert layout_from_entries("A100-80GB", entries) == seven
    for product in ("A100-40GB", "H100-80GB", "H200-141GB"):
        assert layout_from_entries(product, entries) == layout_from_entries(
            product, DEFAULT_ALL_BALANCED), product
    assert with_product_entries(entries, seven) == entries  # already there: unchanged
