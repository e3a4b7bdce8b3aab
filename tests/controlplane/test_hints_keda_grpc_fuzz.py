"""Property-based fuzzing of the DemandHints service and KEDA's external scaler over real gRPC on
loopback, on a real store (SQLite and the PostgreSQL server): requests mix valid shapes with
hostile values (unknown, empty, 10k-character, NUL and non-ASCII models and keys; NaN, infinite,
negative, huge and out-of-range times and rates; int64 extreme ids; numbers KEDA's metadata
cannot hold). Every call answers within a deadline with a code the contract allows (never
INTERNAL, UNKNOWN or UNAVAILABLE on a healthy store), a refusal's details name the field, a
refused hint stores nothing, and afterwards known-good requests get known-good answers. One
server per store (hypothesis runs many examples against it)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from controlplane.adapters.keda import keda_registrar
from controlplane.adapters.keda_query import KEDA_KEYS, METADATA_KEYS
from controlplane.runtime import hints_api, keda_servicer
from controlplane.settings import load_settings
from controlplane.sim.catalog import DEMO_MODELS
from controlplane.sim.clock import VirtualClock
from controlplane.store import Store
from forecaster.types import Forecast
from protos.externalscaler import externalscaler_pb2 as kpb
from protos.externalscaler import externalscaler_pb2_grpc as kpb_grpc
from protos.headroom.v1 import hints_pb2 as pb
from protos.headroom.v1 import hints_pb2_grpc as pb_grpc
from scheduler.domain.names import MAX_MODEL_CHARS, name_problem
from scheduler.server import create_server, stop
from tests.conftest import fresh_postgres_database

DEADLINE_S = 5.0
Code = grpc.StatusCode
FUZZ = settings(max_examples=int(os.environ.get("HEADROOM_FUZZ_EXAMPLES", "60")), deadline=None,
                derandomize=not os.environ.get("HEADROOM_FUZZ_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
BERT = "bert-embed"  # has a fresh forecast in the store
CHAT = "llama-3-8b-chat"  # has none
MODELS = tuple(spec.name for spec in DEMO_MODELS)
HOSTILE = ("", " ", "\x00", "a\x00b", "ü🚀", "x" * 10_000, "\u202e", "BERT-EMBED", BERT + " ")
INT64 = (-(2**63), 2**63 - 1)


@dataclass
class Api:
    hints: pb_grpc.DemandHintsStub
    scaler: kpb_grpc.ExternalScalerStub
    clock: VirtualClock


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres",
                                                               marks=pytest.mark.postgres)])
def api(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Api]:
    if request.param == "sqlite":
        urls: Iterator[str] = iter([f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'h.db'}"])
    else:
        urls = fresh_postgres_database()
    url = next(urls)
    store = Store.open(url, migrate=True)
    store.upsert_models(DEMO_MODELS)
    store.save_forecasts([Forecast(BERT, T0, 60, (800.0,) * 20, (900.0,) * 20, "hybrid")], T0)
    clock = VirtualClock(T0)
    scaler = keda_servicer(load_settings(None), store, clock, DEMO_MODELS)
    server, port = create_server("127.0.0.1:0", extra_servicers=[
        hints_api(store, clock), keda_registrar(scaler)])
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Api(pb_grpc.DemandHintsStub(channel), kpb_grpc.ExternalScalerStub(channel), clock)
    finally:
        channel.close()
        stop(server, 0)
        store.engine.dispose()
        for _ in urls:  # drops the PostgreSQL database
            pass


def call(method: Callable[..., Any], request: Any, allowed: set[grpc.StatusCode]
         ) -> tuple[Any, grpc.RpcError | None]:
    """``method(request)``; its reply or its error, one of ``allowed`` and with details."""
    try:
        reply = method(request, timeout=DEADLINE_S)
    except grpc.RpcError as err:
        note(f"{type(request).__name__}: {err.code().name}")
        summary = str(request)[:1500]
        assert err.code() in allowed, (err.code(), err.details(), summary)
        assert err.details(), (err.code(), summary)
        return None, err
    note(f"{type(request).__name__}: OK")
    return reply, None


def note(text: str) -> None:
    """Count ``text`` in hypothesis's statistics (--hypothesis-show-statistics)."""
    if currently_in_test_context():
        event(text)


def unix_s(api: Api, minutes: float) -> float:
    return (api.clock.now() + timedelta(minutes=minutes)).timestamp()


def doubles() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from((0.0, -0.0, -1.0, math.nan, math.inf, -math.inf, 1e308,
                                      5e-324, 253402300799.0, 253402300800.0, 1e6 + 0.5)),
                     st.floats(allow_nan=True, allow_infinity=True))


def hostile_text(*good: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(good + HOSTILE), st.text(max_size=20))


@st.composite
def add_requests(draw: st.DrawFn, api: Api) -> pb.AddHintRequest:
    """Hints that could be valid (minutes around now) with up to two fields made hostile."""
    valid: dict[str, st.SearchStrategy[Any]] = {
        "model": st.sampled_from(MODELS), "rate_rps": st.sampled_from((1.0, 600.0, 0.25)),
        "start_unix_s": st.one_of(st.just(0.0),
                                  st.floats(-120, 120).map(lambda m: unix_s(api, m))),
        "end_unix_s": st.floats(121, 600).map(lambda m: unix_s(api, m)),
        "reason": st.sampled_from(("", "campaign", "r" * 500, "ü🚀"))}
    hostile: dict[str, st.SearchStrategy[Any]] = {
        "model": hostile_text(), "rate_rps": doubles(),
        "start_unix_s": st.one_of(doubles(), st.floats(-120, 700).map(lambda m: unix_s(api, m))),
        "end_unix_s": st.one_of(doubles(), st.floats(-60, 120).map(lambda m: unix_s(api, m))),
        "reason": st.one_of(st.sampled_from(("r" * 501, "a\x00b")), hostile_text())}
    bad = draw(st.sets(st.sampled_from(sorted(hostile)), max_size=2))
    return pb.AddHintRequest(**{k: draw(hostile[k] if k in bad else v)
                                for k, v in valid.items()})


HINT_FIELDS = ("model:", "rate_rps:", "start_unix_s", "end_unix_s", "reason:")


def listed(api: Api) -> dict[int, pb.DemandHint]:
    reply = api.hints.ListHints(pb.ListHintsRequest(include_ended=True), timeout=DEADLINE_S)
    return {h.id: h for h in reply.hints}


@FUZZ
@given(data=st.data())
def test_add_hint_is_ok_or_invalid_argument_naming_the_field_and_stores_nothing_refused(
        api: Api, data: st.DataObject) -> None:
    request = data.draw(add_requests(api))
    before = listed(api)
    hint, err = call(api.hints.AddHint, request, {Code.INVALID_ARGUMENT})
    after = listed(api)
    if err is not None:
        assert (err.details() or "").startswith(HINT_FIELDS), err.details()
        assert after == before
        return
    assert hint.model == request.model and hint.model in MODELS
    assert math.isfinite(hint.rate_rps) and hint.rate_rps > 0
    assert hint.end_unix_s > api.clock.now().timestamp()
    assert after.get(hint.id) == hint and set(after) - set(before) <= {hint.id}
    again, _ = call(api.hints.AddHint, request, set())  # a retry returns the same hint
    assert again == hint


@FUZZ
@given(include_ended=st.booleans(), model=st.one_of(st.sampled_from(MODELS), hostile_text()))
def test_list_hints_answers_any_filter(api: Api, include_ended: bool, model: str) -> None:
    reply, err = call(api.hints.ListHints, pb.ListHintsRequest(include_ended=include_ended,
                                                               model=model),
                      {Code.INVALID_ARGUMENT})
    if err is not None:  # a name no model can have (a control character): refused, naming it
        assert name_problem(model, MAX_MODEL_CHARS) is not None
        assert (err.details() or "").startswith("model: ")
        return
    assert all(h.model == model for h in reply.hints) or not model
    starts = [h.start_unix_s for h in reply.hints]
    assert starts == sorted(starts)


HINT_IDS = st.one_of(st.integers(*INT64), st.sampled_from((0, -1, 1, 2, 2**31 - 1, 2**31, *INT64)))


@FUZZ
@given(data=st.data())
def test_remove_hint_is_ok_or_not_found_for_any_id(api: Api, data: st.DataObject) -> None:
    before = listed(api)
    # a stored hint (the n-th, drawn without reading the store: hypothesis replays draws) or any id
    nth, any_id = data.draw(st.one_of(st.tuples(st.integers(0, 99), st.none()),
                                      st.tuples(st.none(), HINT_IDS)))
    hint_id = sorted(before)[nth % len(before)] if nth is not None and before else (
        any_id if any_id is not None else 0)
    removed, err = call(api.hints.RemoveHint, pb.RemoveHintRequest(id=hint_id),
                        {Code.NOT_FOUND})
    if err is None:
        assert before.get(hint_id) == removed
    else:
        assert hint_id not in before and (err.details() or "").startswith("id:")
    assert hint_id not in listed(api)
    _, err = call(api.hints.RemoveHint, pb.RemoveHintRequest(id=hint_id), {Code.NOT_FOUND})
    assert err is not None  # removing it again: NOT_FOUND


NUMBERS = ("1", "0", "-1", "0.0005", "nan", "inf", "-inf", "1e400", "1e12", "1e13", "0x10",
           "１２", " 5 ", "1_0", "", "\x00", "5\x00", "x" * 10_000, "0.5", "0.99", "1.0",
           "31622400", "31622401", "1e-320")


VALID_VALUES = {"targetRps": ("10", "0.5", "1e12"), "activationTargetRps": ("0", "1"),
                "lookaheadSeconds": ("600", "60", "31622400"), "quantile": ("0.9", "0.5", "0.99")}
KEYS = st.sampled_from((*METADATA_KEYS, *(k + "FromEnv" for k in METADATA_KEYS),
                        *sorted(KEDA_KEYS), "Model", "target", "", "\x00", "x" * 10_000))
VALUES = st.one_of(st.sampled_from(NUMBERS + MODELS + HOSTILE), st.text(max_size=12))


@st.composite
def metadata(draw: st.DrawFn) -> dict[str, str]:
    """A valid trigger's metadata (a model, some of the optional keys, each maybe FromEnv)
    with up to two keys added or overwritten with hostile ones."""
    out = {"model": draw(st.sampled_from((BERT, BERT, CHAT, *MODELS)))}
    for key in sorted(draw(st.sets(st.sampled_from(sorted(VALID_VALUES)), max_size=3))):
        out[key + draw(st.sampled_from(("", "", "FromEnv")))] = draw(
            st.sampled_from(VALID_VALUES[key]))
    for _ in range(draw(st.integers(0, 2))):
        out[draw(KEYS)] = draw(VALUES)
    return out


def refs() -> st.SearchStrategy[kpb.ScaledObjectRef]:
    return st.builds(kpb.ScaledObjectRef, name=hostile_text("so"),
                     namespace=hostile_text("serving"),
                     scalerMetadata=st.one_of(metadata(),
                                              st.dictionaries(KEYS, VALUES, max_size=3)))


SCALER_CODES = {Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.FAILED_PRECONDITION}


def scaler_refusal_names_what(err: grpc.RpcError) -> None:
    details = err.details() or ""
    if err.code() == Code.INVALID_ARGUMENT:
        assert details.startswith("scalerMetadata."), details
    else:  # no forecast, or one that is not served: it names the model
        assert "model" in details, details


@FUZZ
@given(ref=refs())
def test_is_active_and_get_metric_spec_answer_a_documented_code(
        api: Api, ref: kpb.ScaledObjectRef) -> None:
    _, err = call(api.scaler.IsActive, ref, SCALER_CODES)
    if err is not None:
        scaler_refusal_names_what(err)
    spec, err = call(api.scaler.GetMetricSpec, ref, {Code.INVALID_ARGUMENT, Code.NOT_FOUND})
    if err is not None:
        scaler_refusal_names_what(err)
    else:
        (one,) = spec.metricSpecs
        assert one.metricName.startswith("headroom-") and one.targetSize >= 1
        assert math.isfinite(one.targetSizeFloat) and one.targetSizeFloat >= 0.001


@FUZZ
@given(ref=refs(), name=hostile_text("m"))
def test_get_metrics_answers_a_documented_code_and_a_value_keda_can_hold(
        api: Api, ref: kpb.ScaledObjectRef, name: str) -> None:
    reply, err = call(api.scaler.GetMetrics,
                      kpb.GetMetricsRequest(scaledObjectRef=ref, metricName=name), SCALER_CODES)
    if err is not None:
        scaler_refusal_names_what(err)
        return
    (value,) = reply.metricValues
    assert math.isfinite(value.metricValueFloat) and 0 <= value.metricValueFloat <= 9e15
    assert value.metricValue >= 0


@settings(FUZZ, max_examples=min(FUZZ.max_examples, 25))
@given(ref=refs(), which=st.sampled_from(("StreamIsActive", "StreamMetricSpec")))
def test_streams_answer_at_once_or_refuse_with_a_documented_code(
        api: Api, ref: kpb.ScaledObjectRef, which: str) -> None:
    stream = getattr(api.scaler, which)(ref, timeout=DEADLINE_S)
    try:
        next(stream)
    except grpc.RpcError as err:
        assert err.code() in SCALER_CODES, (err.code(), err.details())
        scaler_refusal_names_what(err)
    finally:
        stream.cancel()


def test_zz_after_the_fuzzing_known_good_requests_get_known_good_answers(api: Api) -> None:
    """Runs last in the module (pytest keeps file order): the services survived everything."""
    for hint_id in listed(api):
        api.hints.RemoveHint(pb.RemoveHintRequest(id=hint_id), timeout=DEADLINE_S)
    added = api.hints.AddHint(pb.AddHintRequest(model=CHAT, rate_rps=600.0,
                                                start_unix_s=unix_s(api, 15),
                                                end_unix_s=unix_s(api, 75), reason="campaign"),
                              timeout=DEADLINE_S)
    assert list(listed(api)) == [added.id]
    assert api.hints.RemoveHint(pb.RemoveHintRequest(id=added.id), timeout=DEADLINE_S) == added
    assert listed(api) == {}
    ref = kpb.ScaledObjectRef(name="bert", namespace="serving", scalerMetadata={"model": BERT})
    reply = api.scaler.GetMetrics(kpb.GetMetricsRequest(scaledObjectRef=ref), timeout=DEADLINE_S)
    assert reply.metricValues[0].metricValueFloat == 900.0
    assert api.scaler.IsActive(ref, timeout=DEADLINE_S).result
    started = time.monotonic()
    stream = api.scaler.StreamIsActive(ref, timeout=DEADLINE_S)
    assert next(stream).result
    stream.cancel()
    assert time.monotonic() - started < DEADLINE_S
