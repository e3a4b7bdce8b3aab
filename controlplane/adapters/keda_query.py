"""What a ScaledObject asks KEDA's external scaler (``controlplane.adapters.keda``): its trigger
metadata, checked and resolved into a ``ScalerQuery``; and the scaler's errors (``ScalerError``:
a gRPC status and its details).

Trigger metadata (KEDA forwards all of it as ``scalerMetadata``):

* ``model`` (required): the model whose forecast drives the ScaledObject; one the scaler does
  not know (not in the store's models table, without a per-replica rate and without a
  forecast) is NOT_FOUND naming it, before any other key is checked;
* ``targetRps``: requests/s one replica should take; default from the model's profile
  (per-replica throughput x target utilization), when the servicer was given one;
* ``lookaheadSeconds`` (default: the servicer's, e.g. provisioning + cold start): window of the
  forecast to cover; ``quantile`` (default 0.9): which upper quantile of it;
* ``activationTargetRps`` (default: one request per lookahead, 1 / lookaheadSeconds; 0 is
  KEDA's own "active above 0"): the rate above which the model is active (named as KEDA's
  built-in scalers name theirs: ``activation`` + the target's key).

Each key may come as ``<key>FromEnv`` instead (KEDA forwards it under that name with the value
resolved from the workload's env, pkg/scalers/external_scaler.go); a bad value is named by the
key as the ScaledObject wrote it (``scalerMetadata.targetRpsFromEnv``), both forms at once, or a
key that is neither Headroom's nor KEDA's own (``scalerAddress``, ``enableTLS``, ``unsafeSsl``,
``caCert``, ``tlsCertFile``, ``tlsClientCert``, ``tlsClientKey``), is INVALID_ARGUMENT naming it
and the nearest valid key.
"""

from __future__ import annotations

import difflib
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import grpc

from controlplane.domain.activity import default_activation_rps
from controlplane.domain.errors import error_line

log = logging.getLogger("headroom.keda")


class ScalerError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def store_down(event: str, what: str, model: str, error: Exception) -> ScalerError:
    """The store could not be read (logged as ``event``): UNAVAILABLE, an error KEDA counts
    towards its ``fallback``, naming ``what`` was to be read for ``model`` and why."""
    reason = error_line(error)
    log.warning(event, extra={"model": model, "error": reason})
    return ScalerError(grpc.StatusCode.UNAVAILABLE,
                       f"{what} cannot be read for model {model!r}: {reason}")


@dataclass(frozen=True, slots=True)
class ScalerQuery:
    model: str
    target_rps: float
    lookahead_s: float
    quantile: float
    metric_name: str
    #: IsActive is true while the expected or observed rate is above it
    activation_rps: float


class TargetRates(Protocol):
    def targets(self) -> Mapping[str, float]:
        """Each model's default per-replica target rate now (e.g. ``CorrectedTargets``)."""
        ...


#: Upper bounds of the numeric metadata: beyond them a value overflowed the int64 ``targetSize``
#: or Python's timedelta and the call failed as UNKNOWN with an interpreter message.
MAX_TARGET_RPS = 1e12
#: KEDA takes ``targetSizeFloat`` and ``metricValueFloat`` in thousandths (``int64(v * 1000)``,
#: pkg/scalers/scaler.go): a target under 0.001 is a target of 0 to the HPA (refused, or a
#: division by zero), a value past int64 / 1000 wraps negative (the HPA would scale in).
MIN_TARGET_RPS = 0.001
MAX_LOOKAHEAD_S = 366 * 86_400.0
#: Trigger metadata keys of Headroom's scaler; each may also come as ``<key>FromEnv`` (KEDA
#: forwards that under its own name with the value it resolved from the container's env).
METADATA_KEYS = ("model", "targetRps", "activationTargetRps", "lookaheadSeconds", "quantile")
#: KEDA's own keys of an external trigger (pkg/scalers/external_scaler.go): forwarded too, ignored.
KEDA_KEYS = frozenset({"scalerAddress", "enableTLS", "unsafeSsl", "caCert", "tlsCertFile",
                       "tlsClientCert", "tlsClientKey"})
FROM_ENV = "FromEnv"


def scaler_query(metadata: Mapping[str, str], targets: Mapping[str, float], lookahead_s: float,
                 known: Callable[[str], bool] | None = None) -> ScalerQuery:
    """The query of a ScaledObject's ``scalerMetadata``: ``targets`` give each model's default
    per-replica rate, ``lookahead_s`` the default lookahead; bad metadata INVALID_ARGUMENT
    naming the key as it was written. ``known`` says whether a model without a target is one of
    the store's models or has a forecast: one that is neither is NOT_FOUND naming it, whether or
    not ``targetRps`` is given (asked before the other keys are checked)."""
    given = resolve_metadata(metadata)
    model = given.values.get("model", "").strip()
    if not model:
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT, "scalerMetadata.model is required")
    if model not in targets and known is not None and not known(model):
        raise ScalerError(grpc.StatusCode.NOT_FOUND,
                          f"model {model!r} is not a model of this store (headroom models "
                          "list) and has no forecast; is scalerMetadata.model spelled as in "
                          "Headroom's models?")
    if not given.values.get("targetRps") and model not in targets:
        with_rate = ", ".join(sorted(targets)) or "none"
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"scalerMetadata.targetRps is required: model {model!r} has no "
                          f"per-replica rate here (models with one: {with_rate}); is "
                          "scalerMetadata.model spelled as in Headroom's models?")
    target = _number(given, "targetRps", targets.get(model), MAX_TARGET_RPS)
    if target < MIN_TARGET_RPS:
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"{given.name('targetRps')} must be at least {MIN_TARGET_RPS:g} "
                          f"(KEDA counts it in thousandths: less is a target of 0), got "
                          f"{given.values.get('targetRps') or target!r}")
    lookahead = _number(given, "lookaheadSeconds", lookahead_s, MAX_LOOKAHEAD_S)
    quantile = _quantile(given)
    activation = _number(given, "activationTargetRps", default_activation_rps(lookahead),
                         MAX_TARGET_RPS, zero=True)
    name = "headroom-" + re.sub(r"[^a-z0-9-]+", "-", model.lower()).strip("-")
    return ScalerQuery(model, target, lookahead, quantile, name, activation)


@dataclass(frozen=True, slots=True)
class GivenMetadata:
    """Headroom's keys of ``scalerMetadata``: each one's value, and the key it came under
    (``targetRps`` or ``targetRpsFromEnv``), which its errors name."""

    values: Mapping[str, str]
    written: Mapping[str, str]

    def name(self, key: str) -> str:
        """``key`` as the ScaledObject wrote it, for an error: ``scalerMetadata.<key>``."""
        return f"scalerMetadata.{self.written.get(key, key)}"


def resolve_metadata(metadata: Mapping[str, str]) -> GivenMetadata:
    """Headroom's keys of ``scalerMetadata``, each from itself or its ``<key>FromEnv``; KEDA's
    own keys dropped; any other key, or a key given both ways, INVALID_ARGUMENT naming it."""
    values: dict[str, str] = {}
    written: dict[str, str] = {}
    for key, value in sorted(metadata.items()):
        base = key.removesuffix(FROM_ENV)
        if base in KEDA_KEYS:
            continue
        if base not in METADATA_KEYS:
            raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT, _unknown_key(key))
        if base in values:
            raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                              f"scalerMetadata.{base} and scalerMetadata.{base}{FROM_ENV} are "
                              "both given; give one")
        values[base], written[base] = value, key
    return GivenMetadata(values, written)


def _unknown_key(key: str) -> str:
    known = {name.lower(): name for name in METADATA_KEYS}
    close = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.6)
    hint = f"did you mean {known[close[0]]}? " if close else ""
    return (f"scalerMetadata.{key} is not a key of Headroom's scaler ({hint}keys: "
            f"{', '.join(METADATA_KEYS)}, each also as <key>{FROM_ENV})")


def _parsed(given: GivenMetadata, key: str) -> float | None:
    """The value of ``key`` as a float (None: not given, or empty); INVALID_ARGUMENT naming the
    key when it is not a number."""
    raw = given.values.get(key)
    if raw is None or raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"{given.name(key)}: {raw!r} is not a number") from None


def _quantile(given: GivenMetadata) -> float:
    """``quantile`` (default 0.9), in [0.5, 1): a lower one would size below the median. Every
    value out of that range (0, a negative, NaN) is refused stating the range."""
    value = _parsed(given, "quantile")
    if value is None:
        return 0.9
    if not 0.5 <= value < 1:  # also NaN
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"{given.name('quantile')} must be in [0.5, 1), got "
                          f"{given.values['quantile']!r}")
    return value


def _number(given: GivenMetadata, key: str, default: float | None,
            most: float = math.inf, zero: bool = False) -> float:
    """The value of ``key``: finite, above 0 (at least 0 when ``zero``), at most ``most``."""
    value = _parsed(given, key)
    if value is None:
        if default is None:
            raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                              f"{given.name(key)} is required")
        return default
    raw = given.values[key]
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"{given.name(key)} must be {'>=' if zero else '>'} 0, got {raw!r}")
    if value > most:
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT,
                          f"{given.name(key)} must be at most {most:g}, got {raw!r}")
    return value
