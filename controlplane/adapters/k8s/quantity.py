"""Kubernetes resource quantities ("7910m", "16Gi", "1e3") as numbers."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX = {
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity(value: object) -> Decimal:
    """Raise ValueError naming the value when it is not a quantity."""
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]
    except InvalidOperation:
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from None


def cpu_milli(value: object) -> int:
    return int(parse_quantity(value) * 1000)


def memory_mib(value: object) -> int:
    return int(parse_quantity(value) / _SUFFIX["Mi"])


def count(value: object) -> int:
    return int(parse_quantity(value))
