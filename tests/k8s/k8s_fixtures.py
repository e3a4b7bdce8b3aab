"""Fixtures: a Kubernetes API test server over real HTTP on 127.0.0.1, an official client bound
to it, and a virtual clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from apiserver import ApiServer
from k8s_harness import START_AT, client_for
from kubernetes import client

from controlplane.sim.clock import VirtualClock


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer().start()
    yield server
    server.stop()


@pytest.fixture
def kube(apiserver: ApiServer) -> client.ApiClient:
    return client_for(apiserver)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START_AT)
