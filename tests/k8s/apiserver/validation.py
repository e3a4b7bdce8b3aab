"""Schema validation on write (HTTP 422): kubernetes-validate's strict OpenAPI schemas for built-in
kinds, a JSON schema for Karpenter's NodePool, and the API server's own semantic checks that no
OpenAPI schema expresses (name and label syntax, non-negative replicas, extended resources).

``kubernetes_validate.validate`` re-reads its 1 MB definitions file on every call (~40 ms per
object); the server builds the same validator (same schema files, draft and registry) once per
kind instead. A test checks both agree."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

KUBERNETES_VERSION = "1.33.0"
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
CRD_SCHEMAS = {("karpenter.sh/v1", "NodePool"): "karpenter-nodepool-v1.json"}

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


class Invalid(Exception):
    """The object fails validation; the message names the field."""


@functools.cache
def _crd_validator(file_name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / file_name).read_text())
    return jsonschema.Draft202012Validator(schema)


@functools.cache
def builtin_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator:
    """kubernetes-validate's strict schema for a kind, compiled once (its own lookup rules)."""
    folder = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv_utils.schema_contents(f"{folder}/{kind.lower()}-{group}.json",
                                          KUBERNETES_VERSION)
    except FileNotFoundError:
        raise kubernetes_validate.SchemaNotFoundError(KUBERNETES_VERSION, kind,
                                                      api_version) from None
    definitions = kv_utils.schema_contents(f"{folder}/_definitions.json", KUBERNETES_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def validate_object(obj: dict[str, Any]) -> None:
    """Raise ``Invalid`` naming the first problem of ``obj``."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key in CRD_SCHEMAS:
        error = jsonschema.exceptions.best_match(_crd_validator(CRD_SCHEMAS[key]).iter_errors(obj))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path) or "(root)"
            raise Invalid(f"{key[1]} {where}: {error.message}")
    else:
        try:
            builtin_validator(*key).validate(obj)
        except jsonschema.ValidationError as error:
            where = ".".join(str(p) for p in error.path) or "(root)"
            raise Invalid(f"{key[1]} {where}: {error.message}") from None
        except kubernetes_validate.SchemaNotFoundError as error:
            raise Invalid(error.message) from None
    _semantic(obj)


def _semantic(obj: dict[str, Any]) -> None:
    meta = obj.get("metadata", {})
    name = meta.get("name", "")
    if not name or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise Invalid(f"metadata.name: Invalid value: {name!r}: must be a DNS-1123 subdomain")
    for field in ("labels", "annotations"):
        for label_key, value in (meta.get(field) or {}).items():
            _check_key(f"metadata.{field}", label_key)
            if field == "labels" and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                raise Invalid(f"metadata.labels: Invalid value: {value!r}: a label value must "
                              "be 63 characters or less, alphanumeric, '-', '_' or '.'")
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind in ("Deployment", "StatefulSet"):
        _check_workload(kind, spec)
    if kind == "PodDisruptionBudget" and ("minAvailable" in spec) == ("maxUnavailable" in spec):
        raise Invalid("spec: exactly one of minAvailable and maxUnavailable must be set")
    if kind == "ConfigMap":
        for data_key in (obj.get("data") or {}):
            if not _CONFIGMAP_KEY.match(data_key):
                raise Invalid(f"data[{data_key}]: a valid config key must consist of "
                              "alphanumeric characters, '-', '_' or '.'")
    if kind == "Lease" and spec.get("leaseDurationSeconds", 1) <= 0:
        raise Invalid("spec.leaseDurationSeconds: must be greater than 0")
    if kind == "Pod":
        _check_pod_spec("spec", spec)


def _check_key(field: str, key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise Invalid(f"{field}: Invalid value: {key!r}: prefix must be a DNS-1123 subdomain")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise Invalid(f"{field}: Invalid value: {key!r}: name part must be a qualified name")


def _check_workload(kind: str, spec: dict[str, Any]) -> None:
    if spec.get("replicas", 0) < 0:
        raise Invalid(f"spec.replicas: Invalid value: {spec['replicas']}: must be greater than "
                      "or equal to 0")
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        raise Invalid(f"{kind} spec.template.metadata.labels: Invalid value: `selector` does "
                      "not match template `labels`")
    _check_pod_spec("spec.template.spec", template.get("spec") or {})


def _check_pod_spec(field: str, pod_spec: dict[str, Any]) -> None:
    for i, container in enumerate(pod_spec.get("containers") or []):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for resource, quantity in requests.items():
            extended = "/" in resource and "kubernetes.io/" not in resource
            if extended and str(limits.get(resource)) != str(quantity):
                raise Invalid(f"{field}.containers[{i}].resources.requests[{resource}]: "
                              "Invalid value: must be equal to the limit (extended resource)")
