"""Settings groups of the cluster a production ``headroom serve`` runs against: ``prometheus``
(request rates, history and latency) and ``k8s`` (the Kubernetes API, leader election, MIG
re-layout)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from controlplane.domain.labels import is_label_key, is_label_value
from controlplane.domain.url_secrets import masked
from controlplane.settings_groups import Group
from forecaster.sources.promql import LATENCY_HISTOGRAMS


def http_url_problem(url: str) -> str | None:
    """Why ``url`` is no http(s) URL of a host (a password in it shown as ``***``), or None.
    Checked where it is given: ``127.0.0.1:9090`` would otherwise load and fail only when
    Prometheus is first asked, as "unreachable (No host specified.)"."""
    shown = masked(url)
    parts = urlsplit(url)
    if "://" not in url:
        return f"{shown!r} is not a URL: give the scheme, e.g. http://{shown}"
    if parts.scheme not in ("http", "https"):
        return f"{shown!r}: the scheme must be http or https, not {parts.scheme!r}"
    if not parts.hostname:
        return f"{shown!r} names no host, e.g. http://127.0.0.1:9090"
    try:
        parts.port  # noqa: B018 - urllib checks the port when it is read
    except ValueError as error:
        return f"{shown!r}: {error}"
    return None


class ModelQuerySettings(Group):
    """One model's own PromQL of its load, in the unit its profile's ``throughput_rps`` is in
    (e.g. an LLM's generated tokens per second beside other models' requests per second)."""

    query: str = Field(description="PromQL of the model's rate, optionally with {model} and "
                       "{window} (the rate window)")
    sample_series: str | None = Field(None, description="series selector of the samples the "
                                      "query rests on (optionally with {model}): its newest "
                                      "sample dates the model's rate, as "
                                      "prometheus.query_sample_series does for the shared query")

    @field_validator("query", "sample_series")
    @classmethod
    def _not_blank(cls, text: str | None) -> str | None:
        if text is not None and not text.strip():
            raise ValueError("must not be empty")
        return text


class PrometheusSettings(Group):
    """Where the Kubernetes backend reads each model's request rate (every tick) and history
    (every forecast refresh), and ``headroom forecast run --prometheus-url`` its credentials."""

    url: str | None = Field(None, description="base URL of Prometheus, e.g. http://127.0.0.1:9090"
                            "; required by serve with backend: kubernetes")
    timeout_s: float = Field(10.0, gt=0, description="timeout of one request")
    metric: Literal["triton", "vllm", "sglang"] = Field(
        "triton", description="request-count preset: triton (nv_inference_request_success + "
        "nv_inference_request_failure: arrivals, label model), vllm "
        "(vllm:request_success_total, label model_name) or sglang (sglang:num_requests_total, "
        "label model_name); it names the engine whose latency, queue and KV cache gauges are "
        "read too")
    by_engine: bool = Field(False, description="read each model by the preset of its engine "
                            "(the models file's engine: triton, vllm or sglang), so a fleet "
                            "that mixes engines is read by one grouped query per engine; "
                            "metric reads the models without one. Triton models keep their "
                            "mean latency where latency_quantile or latency: ttft asks more "
                            "of the others")
    query: str | None = Field(None, description="custom PromQL with a {model} placeholder (and "
                              "optionally {window}, the rate window) instead of the preset")
    query_sample_series: str | None = Field(
        None, description="series selector of the samples the custom query rests on, with "
        "{model} (e.g. my_requests_total{service=\"{model}\"}): the newest sample's time "
        "dates the model's rate, so reconcile.max_staleness_s holds a stale one as it does a "
        "preset's (one more query per model and tick); without it a custom query's rates are "
        "undated, staleness is not checked for them, and every tick's notes say so")
    model_queries: dict[str, ModelQuerySettings] = Field(
        default_factory=dict, description="model name -> its own query (and sample_series) in "
        "place of the preset or the shared query, e.g. an LLM scaled on generated tokens in a "
        "fleet whose other models scale on requests; such a model's request queue is not read")
    latency_query: str | None = Field(None, description="custom PromQL of a model's "
                                      "request latency in ms, with a {model} placeholder (and "
                                      "optionally {window}); default: the metric preset's mean "
                                      "(Triton request duration / successes, vLLM's or "
                                      "SGLang's e2e latency histogram sum / count), one "
                                      "grouped query per tick")
    latency_quantile: float | None = Field(None, gt=0, lt=1, description="judge each model's "
                                           "latency_slo_ms at this quantile of its request "
                                           "latency (e.g. 0.95) instead of the mean: "
                                           "histogram_quantile over vLLM's or SGLang's e2e "
                                           "latency buckets (metric: vllm or sglang; Triton "
                                           "exports no request latency histogram: give "
                                           "latency_query)")
    latency: Literal["e2e", "ttft"] = Field(
        "e2e", description="what the preset's latency times: e2e, the whole request (Triton's "
        "request duration, vLLM's or SGLang's e2e histogram), or ttft, the time to first token "
        "(vLLM's or SGLang's time_to_first_token_seconds histogram: each model's "
        "latency_slo_ms and profile latency_ms are then times to first token), the mean or "
        "latency_quantile; one grouped query per tick")
    rate_window_s: int = Field(120, ge=1, description="shortest rate window: a tick reads "
                               "rate(...[this]); a history step of step_s reads "
                               "rate(...[max(step_s, this)]) at the step's end")
    username: str | None = Field(None, description="basic auth user (with password)")
    password: SecretStr | None = Field(None, description="basic auth password; never logged")
    bearer_token_file: Path | None = Field(None, description="file holding a bearer token, "
                                           "read at start (e.g. a mounted Secret); never logged")
    ca_file: Path | None = Field(None, description="PEM CA bundle an https Prometheus's "
                                 "certificate is verified against (default: the system's CAs)")
    insecure_skip_verify: bool = Field(False, description="do not verify an https "
                                       "Prometheus's certificate (test setups only: the "
                                       "credentials sent and the load read could be anyone's)")

    @field_validator("url")
    @classmethod
    def _an_http_url(cls, url: str | None) -> str | None:
        problem = None if url is None else http_url_problem(url)
        if problem is not None:
            raise ValueError(problem)
        return url

    @field_validator("query", "latency_query", "query_sample_series")
    @classmethod
    def _has_model_placeholder(cls, query: str | None) -> str | None:
        if query is not None and "{model}" not in query:
            raise ValueError(f"PromQL {query!r} has no {{model}} placeholder")
        return query

    @model_validator(mode="after")
    def _query_or_presets(self) -> PrometheusSettings:
        """A sample series dates a custom query; engines' presets are no custom query."""
        if self.query_sample_series is not None and self.query is None:
            raise ValueError("prometheus.query_sample_series dates a custom prometheus.query; "
                             "the metric presets date their own rates: set query, or remove "
                             "query_sample_series")
        if self.by_engine and self.query is not None:
            raise ValueError("prometheus.by_engine reads each model by its engine's preset; a "
                             "prometheus.query replaces the presets: give one of them "
                             "(prometheus.model_queries gives single models their own)")
        return self

    @model_validator(mode="after")
    def _latency_has_a_histogram(self) -> PrometheusSettings:
        """``latency_quantile`` and ``latency: ttft`` read the preset's histograms: a
        ``latency_query`` decides its own statistic and what it times, and Triton has none."""
        for setting, histogram, decides, asked in (
                ("prometheus.latency_quantile", "a request latency histogram",
                 "its own statistic", self.latency_quantile is not None),
                ("prometheus.latency: ttft", "a time-to-first-token histogram", "what it times",
                 self.latency == "ttft")):
            if not asked:
                continue
            if self.latency_query is not None:
                raise ValueError(f"{setting} reads the vllm and sglang presets' histograms; a "
                                 f"prometheus.latency_query decides {decides}: give one of them")
            if self.metric not in LATENCY_HISTOGRAMS and not self.by_engine:
                raise ValueError(f"{setting} needs {histogram}; metric {self.metric} has none "
                                 "(Triton's only histogram is the opt-in first-response one): "
                                 "use metric vllm or sglang, or give prometheus.latency_query")
        return self

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> PrometheusSettings:
        if (self.username is None) != (self.password is None):
            raise ValueError("prometheus.username and prometheus.password go together")
        if self.username is not None and self.bearer_token_file is not None:
            raise ValueError("give prometheus.username/password or prometheus.bearer_token_file"
                             ", not both")
        if self.ca_file is not None and self.insecure_skip_verify:
            raise ValueError("give prometheus.ca_file (verify against that CA) or "
                             "prometheus.insecure_skip_verify (do not verify), not both")
        return self


class KubernetesSettings(Group):
    kubeconfig: str | None = Field(None, description="path; None = in-cluster or ~/.kube/config")
    namespace: str = Field("headroom")
    field_manager: str = Field("headroom")
    request_timeout_s: float = Field(10.0, gt=0, description="timeout of one API request; "
                                     "in a leader's actuator call cut to the time left before "
                                     "its renew deadline, after which none is sent")
    model_label: str = Field("headroom.dev/model", description="label on Triton/vLLM "
                             "Deployments and StatefulSets naming the model they serve")
    workload_namespaces: list[str] = Field(default_factory=list, description="namespaces of "
                                           "model workloads; empty = all namespaces")
    node_provisioner: Literal["karpenter", "cluster-autoscaler"] = Field(
        "karpenter", description="what adds and removes a pool's nodes: karpenter (Headroom "
        "writes the pool's NodePool node limit and target; its placeholders select "
        "karpenter.sh/nodepool) or cluster-autoscaler (node groups: Headroom writes only the "
        "placeholders, selecting node_group_label, and records the target on their Deployment; "
        "the node group's min and max stay yours)")
    node_group_label: str = Field("headroom.dev/pool", description="cluster-autoscaler: the "
                                  "node label whose value (nodepool_names, default the pool "
                                  "name) marks a pool's nodes; the placeholders select it and "
                                  "the inventory puts a node in the pool by it. Put it in the "
                                  "node group's node template (scale from zero: its "
                                  "k8s.io/cluster-autoscaler/node-template/label/ tag)")
    nodepool_names: dict[str, str] = Field(default_factory=dict, description="pool -> Karpenter "
                                           "NodePool name, or under cluster-autoscaler the "
                                           "node_group_label value of its nodes (default: the "
                                           "pool name)")
    placeholder_priority_class: str = Field("headroom-warm-placeholder", description="low "
                                            "PriorityClass of the warm-capacity placeholder pods")
    placeholder_image: str = Field("registry.k8s.io/pause:3.10")
    gpu_operator_namespace: str = Field("gpu-operator", description="namespace of the GPU "
                                        "Operator's MIG manager and device plugin ConfigMaps")
    mig_config_map: str = Field("headroom-mig-parted-config", description="mig-parted "
                                "ConfigMap (key config.yaml) the MIG manager is pointed at")
    device_plugin_config_map: str = Field("headroom-device-plugin-config", description=
                                          "device-plugin ConfigMap (one key per named config)")
    mig_strategy: Literal["mixed"] = Field("mixed", description="device plugin MIG strategy: "
                                           "mixed, as Headroom's layouts mix profiles on a GPU "
                                           "(single needs one profile everywhere and makes GFD "
                                           "count MIG devices in nvidia.com/gpu.count)")
    device_plugin_mps: bool = Field(False, description="whether the device plugin may share "
                                    "whole GPUs by MPS. It refuses MPS under the mixed MIG "
                                    "strategy ('using --mig-strategy=mixed is not supported "
                                    "with MPS'), which the GPU Operator sets on every node from "
                                    "its ClusterPolicy's spec.mig.strategy and which Headroom's "
                                    "MIG layouts need: true only on a cluster whose "
                                    "ClusterPolicy strategy is none (no MIG). False: a model's "
                                    "whole-GPU MPS profile points are refused (serve, models "
                                    "import --config) and no MPS config is ever written")
    lease_name: str = Field("headroom-leader", description="coordination.k8s.io/v1 Lease")
    lease_duration_s: int = Field(15, ge=1, description="followers wait this long")
    renew_deadline_s: float = Field(10.0, gt=0, description="a leader stops acting this long "
                                    "after its last successful renew (< lease_duration_s), "
                                    "its requests in flight included")
    identity: str | None = Field(None, description="leader election identity; None = "
                                 "hostname + process id")
    surge_timeout_s: float = Field(900.0, gt=0, description="MIG relayout: wait for surge "
                                   "capacity before giving up (nothing disrupted yet)")
    drain_timeout_s: float = Field(3600.0, gt=0, description="MIG relayout: give up draining "
                                   "(uncordon, alert) after this long; never forces evictions")
    mig_timeout_s: float = Field(900.0, gt=0, description="MIG relayout: wait this long for "
                                 "nvidia.com/mig.config.state=success before rolling back")
    relayout_retry_after_s: float = Field(3600.0, ge=0, description="MIG relayout: a node's "
                                          "relayout that was aborted, rolled back or failed is "
                                          "not retried to the same config before this long")
    loading_guard_max_s: float = Field(900.0, ge=0, description="a model's pod that is not "
                                       "ready (loading its weights, after a start or a "
                                       "restart) carries karpenter.sh/do-not-disrupt: true, "
                                       "so consolidation does not move it halfway through its "
                                       "load, until it is ready or for at most this long; 0 "
                                       "turns the guard off")
    config_propagation_s: float = Field(120.0, ge=0, description="MIG layouts and GPU sharing: "
                                        "a config Headroom writes to the MIG manager's or the "
                                        "device plugin's ConfigMap selects a node (its label) "
                                        "only this long after it was written, unchanged; they "
                                        "read it from a mounted volume that kubelet updates "
                                        "about 60-90 s after the ConfigMap changes")

    @property
    def uses_nodepools(self) -> bool:
        """Whether Karpenter NodePools size the pools (else Cluster Autoscaler node groups)."""
        return self.node_provisioner == "karpenter"

    @field_validator("node_group_label")
    @classmethod
    def _is_a_label_key(cls, label: str) -> str:
        if not is_label_key(label):
            raise ValueError(f"{label!r} is not a label key (an optional DNS prefix and '/', "
                             "then up to 63 letters, digits, '-', '_' or '.', alphanumeric at "
                             "both ends), e.g. headroom.dev/pool")
        return label

    @model_validator(mode="after")
    def _node_groups_are_label_values(self) -> KubernetesSettings:
        if self.node_provisioner != "cluster-autoscaler":
            return self
        for pool, value in sorted(self.nodepool_names.items()):
            if not is_label_value(value):
                raise ValueError(f"k8s.nodepool_names.{pool}: {value!r} is not a label value "
                                 f"(k8s.node_group_label {self.node_group_label} on the pool's "
                                 "nodes): up to 63 letters, digits, '-', '_' or '.', "
                                 "alphanumeric at both ends")
        return self

    @model_validator(mode="after")
    def _lease_timing(self) -> KubernetesSettings:
        if self.renew_deadline_s >= self.lease_duration_s:
            raise ValueError("k8s.renew_deadline_s must be < k8s.lease_duration_s")
        return self


