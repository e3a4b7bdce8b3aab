"""Kubernetes API test server (a test double over real HTTP on 127.0.0.1)."""

from .objects import ApiError
from .server import ApiServer, Hold, RequestRecord
from .validation import KUBERNETES_VERSION, Invalid, validate_object

__all__ = ["KUBERNETES_VERSION", "ApiError", "ApiServer", "Hold", "Invalid", "RequestRecord",
           "validate_object"]
