"""Triton explicit model control (``--model-control-mode=explicit``) through tritonclient's HTTP
client: load / unload a model, list the repository (REFERENCE.md §5.2). Used for the warm-pool
rung "loaded but idle": a model loaded on a running server answers within seconds."""

from __future__ import annotations

from typing import Any

import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from controlplane.domain.actions import ActionOutcome
from controlplane.domain.errors import TransientError


class TritonModelControl:
    """ModelLoader over one Triton server (``host:port`` of its HTTP endpoint)."""

    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url = url
        self.timeout_s = timeout_s

    def _client(self) -> Any:
        return triton_http.InferenceServerClient(url=self.url, connection_timeout=self.timeout_s,
                                                 network_timeout=self.timeout_s)

    def _control(self, verb: str, model: str) -> ActionOutcome:
        client = self._client()
        try:
            if verb == "load":
                client.load_model(model)
            else:
                client.unload_model(model)
            return ActionOutcome(model, True, f"triton {self.url}: {verb}ed {model}")
        except InferenceServerException as error:
            return ActionOutcome(model, False, f"triton {self.url}: {verb} {model}: "
                                 f"{error.message()}", retryable=False)
        except OSError as error:  # refused, reset, timed out
            return ActionOutcome(model, False, f"triton {self.url} unreachable: {error}",
                                 retryable=True)
        finally:
            client.close()

    def load_model(self, model: str) -> ActionOutcome:
        return self._control("load", model)

    def unload_model(self, model: str) -> ActionOutcome:
        return self._control("unload", model)

    def repository(self) -> dict[str, str]:
        """Model name -> state (READY, UNAVAILABLE, ...) from the repository index."""
        client = self._client()
        try:
            index = client.get_model_repository_index()
        except InferenceServerException as error:
            raise TransientError(f"triton {self.url}: index: {error.message()}") from None
        except OSError as error:
            raise TransientError(f"triton {self.url} unreachable: {error}") from None
        finally:
            client.close()
        return {str(m["name"]): str(m.get("state", "")) for m in index}
