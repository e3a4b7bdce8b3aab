"""Kubernetes label keys and values as the API server checks them (k8s.io/apimachinery
validation.IsQualifiedName and IsValidLabelValue). Pure."""

from __future__ import annotations

import re

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"  # up to 63, alphanumeric at both ends
_KEY = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}")
_VALUE = re.compile(rf"({_NAME})?")


def is_label_key(text: str) -> bool:
    """An optional DNS-subdomain prefix and '/', then a name of up to 63 characters."""
    return len(text) <= 316 and _KEY.fullmatch(text) is not None


def is_label_value(text: str) -> bool:
    """Empty, or up to 63 letters, digits, '-', '_' or '.', alphanumeric at both ends."""
    return len(text) <= 63 and _VALUE.fullmatch(text) is not None
