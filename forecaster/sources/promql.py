"""The PromQL Headroom asks Prometheus: the presets' per-model request rates (``triton``:
``nv_inference_request_success``, label ``model``; ``vllm``: ``vllm:request_success_total``,
label ``model_name``), the newest sample time behind them, and the request latency."""

from __future__ import annotations

from dataclasses import dataclass

from forecaster.errors import SourceError

SAMPLE_RESOLUTION_S = 15  # the step at which the newest sample time behind a rate is looked for


@dataclass(frozen=True, slots=True)
class Preset:
    metric: str
    label: str

    def query(self, model: str, window_s: int) -> str:
        return f'sum(rate({self.metric}{{{self.label}="{escape(model)}"}}[{window_s}s]))'

    def grouped(self, window_s: int) -> str:
        """Every model's rate in one query, one series per label value."""
        return f"sum by ({self.label}) (rate({self.metric}[{window_s}s]))"

    def newest_sample(self, window_s: int) -> str:
        """Every model's newest sample time (unix s) behind its rate: exact for a series
        scraped within Prometheus' lookback (5 min by default: ``timestamp`` of the instant
        vector), else the newest in the last ``window_s`` to within ``SAMPLE_RESOLUTION_S`` (a
        scrape that stopped: a subquery, whose steps are aligned, so it misses the samples
        after its last step and alone would date a live series up to a step too old)."""
        return newest_sample(self.metric, window_s, f" by ({self.label})")


def newest_sample(selector: str, window_s: int, by: str = "") -> str:
    """The newest sample time (unix s) of the series ``selector`` picks (``Preset.newest_sample``
    says how), the max over them, grouped ``by`` (e.g. `` by (model)``; "" for one value)."""
    step_s = min(window_s, SAMPLE_RESOLUTION_S)
    return (f"max{by} (timestamp({selector})) or "
            f"max{by} (max_over_time(timestamp({selector})[{window_s}s:{step_s}s]))")


PRESETS = {
    "triton": Preset("nv_inference_request_success", "model"),
    "vllm": Preset("vllm:request_success_total", "model_name"),
}


def latency_query(preset: str, window_s: int, quantile: float | None = None) -> str:
    """Every model's request latency in ms over the window, one series per model label: the
    mean (Triton's cumulative request duration (us) over its successful requests, vLLM's
    end-to-end latency histogram's sum (s) over its count), or with ``quantile`` that quantile
    of vLLM's e2e latency histogram (``histogram_quantile`` over its buckets' rates; Triton has
    no request latency histogram: SourceError)."""
    w = f"[{window_s}s]"
    if quantile is not None:
        if not 0 < quantile < 1:
            raise SourceError(f"latency quantile must be in (0, 1), got {quantile}")
        if preset != "vllm":
            raise SourceError(f"preset {preset!r} has no request latency histogram for the "
                              f"latency quantile {quantile}; give a latency query instead")
        return (f"histogram_quantile({quantile}, sum by (model_name, le) "
                f"(rate(vllm:e2e_request_latency_seconds_bucket{w}))) * 1000")
    if preset == "triton":
        return (f"sum by (model) (rate(nv_inference_request_duration_us{w})) / sum by (model) "
                f"(rate(nv_inference_request_success{w})) / 1000")
    return (f"sum by (model_name) (rate(vllm:e2e_request_latency_seconds_sum{w})) / sum by "
            f"(model_name) (rate(vllm:e2e_request_latency_seconds_count{w})) * 1000")


def escape(value: str) -> str:
    """A PromQL double-quoted label value."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
