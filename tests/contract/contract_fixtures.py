"""The contract suite reuses the Kubernetes API test server and builders from tests/k8s."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

K8S_TESTS = Path(__file__).resolve().parent.parent / "k8s"
if str(K8S_TESTS) not in sys.path:
    sys.path.insert(0, str(K8S_TESTS))

from contract_harness import HARNESS_PARAMS, HARNESSES, Harness  # noqa: E402

# the node-layout contract needs a GPU node; the real-cluster harness brings none of its own
GPU_NODE_PARAMS = [p for p in HARNESS_PARAMS if p in ("sim", "k8s-apiserver")]


@pytest.fixture(params=HARNESS_PARAMS)
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    yield from HARNESSES[request.param]()


@pytest.fixture(params=GPU_NODE_PARAMS)
def gpu_harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    yield from HARNESSES[request.param]()
