"""The PromQL Headroom asks Prometheus: the presets' per-model request rates (``triton``:
``nv_inference_request_success`` plus ``nv_inference_request_failure``, label ``model``;
``vllm``: ``vllm:request_success_total``, label ``model_name``; ``sglang``:
``sglang:num_requests_total``, label ``model_name``), the newest sample time behind them, the
request latency, the queue and the KV cache usage.

A rate is of the requests that arrived, not only of those served. Triton counts every request
it received as a success or a failure (failures by ``reason``: REJECTED when the queue is full
(``max_queue_size``) or a request timed out in it, CANCELED, BACKEND, OTHER), so the ``triton``
preset adds all its failures; read from successes alone, an overloaded model's demand would stop
at what it serves and the forecast would learn that limit. vLLM's
``vllm:request_success_total`` counts every finished request (each ``finished_reason``: stop,
length, abort), SGLang's ``sglang:num_requests_total`` likewise. But each engine counts a
request when it finishes, and one it cannot serve yet waits in its queue rather than being
rejected (vLLM's and SGLang's always, Triton's without ``max_queue_size``), so while the
requests it holds grow, finished requests understate arrivals. A preset's history
(``Preset.arrivals``, what the forecast learns) therefore adds how fast the requests its
replicas hold grew over the window (``HELD_GAUGES``: queued, and in vLLM's and SGLang's running
batch): arrivals are what finished plus what is held beyond what was held. Over consecutive
windows the held terms cancel, so a queue that drains again adds nothing in all, and while it
drains the history reads the arrivals, not the backlog served. Each tick reads what finished
(``Preset.grouped``) and the held requests' growth (``queue_query``) apart: the load adds the
growth, and the profile correction keeps what finished."""

from __future__ import annotations

from dataclasses import dataclass

from forecaster.errors import SourceError

SAMPLE_RESOLUTION_S = 15  # the step at which the newest sample time behind a rate is looked for


@dataclass(frozen=True, slots=True)
class ModelQuery:
    """One model's own PromQL in place of the preset or the shared custom query (e.g. an LLM's
    generated tokens beside other models' requests): ``query`` may hold ``{model}`` and
    ``{window}``; ``sample_series`` (optional, ``{model}`` allowed) names the series whose
    newest sample dates the model's rate."""

    query: str
    sample_series: str | None = None

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise SourceError("a model's own PromQL query must not be empty")
        if self.sample_series is not None and not self.sample_series.strip():
            raise SourceError("a model's sample series must not be empty")


@dataclass(frozen=True, slots=True)
class Preset:
    metric: str  # the counter of served requests; its series list the models and date a rate
    label: str
    failed: str | None = None  # the counter of failed requests (any labels beyond ``label``)
    #: the gauges of the requests a replica holds unfinished (``HELD_GAUGES``)
    held: tuple[str, ...] = ()
    #: the label of the ranks whose gauges copy one replica's (``RANK_LABELS``)
    rank: str | None = None

    def arrivals(self, model: str, window_s: int) -> str:
        """The model's history: the requests that arrived per second over the window, what
        finished plus how fast the requests its replicas hold grew (``held``), not below 0; a
        model that exports no held gauge (a Triton older than its pending-request gauge) is
        read at what finished."""
        matcher = f'{{{self.label}="{escape(model)}"}}'
        finished = self._finished(matcher, window_s, "")
        if not self.held:
            return finished
        return (f"clamp_min(({finished} + {self._held_growth(matcher, window_s, '')}) "
                f"or {finished}, 0)")

    def selector(self, model: str) -> str:
        """The model's series of ``metric``: those that date its rate."""
        return f'{self.metric}{{{self.label}="{escape(model)}"}}'

    def grouped(self, window_s: int) -> str:
        """Every model's rate of finished requests in one query, one series per label value:
        each tick's (it adds the held requests' growth, ``held_growth``, to the load only, and
        keeps what finished for the profile correction, which must not count as served what
        only queued)."""
        return self._finished("", window_s, f" by ({self.label})")

    def held_growth(self, window_s: int) -> str:
        """How fast every model's requests held unfinished grew over the window (requests/s),
        one series per label value; a model that exports no held gauge has none."""
        return self._held_growth("", window_s, f" by ({self.label})")

    def _held_growth(self, matcher: str, window_s: int, by: str) -> str:
        """The ``delta`` over the window of each held gauge the model exports (a replica's rank
        copies collapsed), summed, per second: over consecutive windows they add up to what is
        held at the end less what was at the start."""
        return _sum_present([
            f"sum{by} ({self.per_replica(f'delta({gauge}{matcher}[{window_s}s])')}) / {window_s}"
            for gauge in self.held])

    def _finished(self, matcher: str, window_s: int, by: str) -> str:
        """The served requests' rate plus the failed ones' where the model has both series,
        else whichever it has (``_sum_present``: a Triton whose failure series carry no
        ``reason`` has the success one's labels)."""
        return _sum_present([_sum_rate(f"{counter}{matcher}", window_s, by)
                             for counter in (self.metric, self.failed) if counter is not None])

    def per_replica(self, gauge: str) -> str:
        """``gauge`` (PromQL of per-series values) with each replica's rank copies collapsed."""
        return gauge if self.rank is None else f"max without ({self.rank}) ({gauge})"

    def newest_sample(self, window_s: int) -> str:
        """Every model's newest sample time (unix s) behind its rate: exact for a series
        scraped within Prometheus' lookback (5 min by default: ``timestamp`` of the instant
        vector), else the newest in the last ``window_s`` to within ``SAMPLE_RESOLUTION_S`` (a
        scrape that stopped: a subquery, whose steps are aligned, so it misses the samples
        after its last step and alone would date a live series up to a step too old)."""
        return newest_sample(self.metric, window_s, f" by ({self.label})")


def _sum_present(terms: list[str]) -> str:
    """The sum of the (one or two) ``terms`` where a model has both, else whichever it has:
    ``a + b`` alone drops a model without one of them, and ``sum(a or b)`` drops ``b``'s series
    that has ``a``'s labels."""
    if len(terms) == 1:
        return terms[0]
    assert len(terms) == 2, terms
    first, second = terms
    return f"(({first} + {second}) or {first} or {second})"


def _sum_rate(selector: str, window_s: int, by: str) -> str:
    return f"sum{by} (rate({selector}[{window_s}s]))" if by else \
        f"sum(rate({selector}[{window_s}s]))"


def newest_sample(selector: str, window_s: int, by: str = "") -> str:
    """The newest sample time (unix s) of the series ``selector`` picks (``Preset.newest_sample``
    says how), the max over them, grouped ``by`` (e.g. `` by (model)``; "" for one value)."""
    step_s = min(window_s, SAMPLE_RESOLUTION_S)
    return (f"max{by} (timestamp({selector})) or "
            f"max{by} (max_over_time(timestamp({selector})[{window_s}s:{step_s}s]))")


def sample_count(selector: str, window_s: int) -> str:
    """The samples in the last ``window_s`` of the series ``selector`` picks that has most."""
    return f"max(count_over_time({selector}[{window_s}s]))"


#: a preset's label of the ranks whose gauges copy one replica's: SGLang's schedulers of one
#: server report per tensor-parallel rank (rank 0 alone by default; every rank with
#: --enable-metrics-for-all-schedulers), so a replica's gauge is the max over them
RANK_LABELS = {"sglang": "tp_rank"}

#: each preset's gauge of the requests a model's replicas hold waiting now (summed over them):
#: Triton's queued and not yet executing, vLLM's and SGLang's not yet in the running batch
QUEUE_GAUGES = {"triton": "nv_inference_pending_request_count",
                "vllm": "vllm:num_requests_waiting",
                "sglang": "sglang:num_queue_reqs"}

#: each preset's gauges of the requests a replica holds and has not finished: the queue and,
#: for vLLM and SGLang, the running batch (Triton exports no gauge of the requests it executes;
#: its batches are short)
HELD_GAUGES = {"triton": (QUEUE_GAUGES["triton"],),
               "vllm": (QUEUE_GAUGES["vllm"], "vllm:num_requests_running"),
               "sglang": (QUEUE_GAUGES["sglang"], "sglang:num_running_reqs")}

PRESETS = {name: Preset(metric, label, failed, HELD_GAUGES[name], RANK_LABELS.get(name))
           for name, metric, label, failed in (
               ("triton", "nv_inference_request_success", "model",
                "nv_inference_request_failure"),
               ("vllm", "vllm:request_success_total", "model_name", None),
               ("sglang", "sglang:num_requests_total", "model_name", None))}

#: each preset's latency histograms (s) by what they time: the end-to-end request latency
#: (``e2e``) and the time to first token (``ttft``); Triton has none (its request duration is a
#: counter, its only histogram the opt-in first-response one)
LATENCY_HISTOGRAMS = {
    "vllm": {"e2e": "vllm:e2e_request_latency_seconds",
             "ttft": "vllm:time_to_first_token_seconds"},
    "sglang": {"e2e": "sglang:e2e_request_latency_seconds",
               "ttft": "sglang:time_to_first_token_seconds"},
}
LATENCY_TIMED = ("e2e", "ttft")

def latency_query(preset: str, window_s: int, quantile: float | None = None,
                  timed: str = "e2e") -> str:
    """Every model's request latency in ms over the window, one series per model label: the
    mean (Triton's cumulative request duration (us) over its successful requests, vLLM's or
    SGLang's histogram's sum (s) over its count: ``timed`` ``e2e``, the end-to-end latency, or
    ``ttft``, the time to first token), or with ``quantile`` that quantile of the histogram
    (``histogram_quantile`` over its buckets' rates; Triton has no request latency histogram:
    SourceError)."""
    w = f"[{window_s}s]"
    if timed not in LATENCY_TIMED:
        raise SourceError(f"unknown latency {timed!r}; choose one of {', '.join(LATENCY_TIMED)}")
    histogram = LATENCY_HISTOGRAMS.get(preset, {}).get(timed)
    if histogram is None and timed != "e2e":
        raise SourceError(f"preset {preset!r} has no {timed} histogram; give a latency query "
                          "instead")
    if quantile is not None:
        if not 0 < quantile < 1:
            raise SourceError(f"latency quantile must be in (0, 1), got {quantile}")
        if histogram is None:
            raise SourceError(f"preset {preset!r} has no request latency histogram for the "
                              f"latency quantile {quantile}; give a latency query instead")
        return (f"histogram_quantile({quantile}, sum by (model_name, le) "
                f"(rate({histogram}_bucket{w}))) * 1000")
    if histogram is None:
        return (f"sum by (model) (rate(nv_inference_request_duration_us{w})) / sum by (model) "
                f"(rate(nv_inference_request_success{w})) / 1000")
    return (f"sum by (model_name) (rate({histogram}_sum{w})) / sum by "
            f"(model_name) (rate({histogram}_count{w})) * 1000")


def queue_query(preset: str, growth_window_s: int | None = None) -> str:
    """Every model's waiting requests now, one series per model label (``QUEUE_GAUGES``); with
    ``growth_window_s``, how fast the requests its replicas hold (queued and running) grew over
    that window (``Preset.held_growth``), the rate arrivals outran completions."""
    if preset not in QUEUE_GAUGES:
        raise SourceError(f"unknown metric preset {preset!r} for the request queue")
    got = PRESETS[preset]
    if growth_window_s is not None:
        return got.held_growth(growth_window_s)
    return f"sum by ({got.label}) ({got.per_replica(QUEUE_GAUGES[preset])})"


#: each preset's gauges of the KV cache a replica's running requests hold (0-1), the first a
#: replica exports read: vLLM's, and the name it had before vLLM V1 (routers read both);
#: SGLang's token usage (of its KV cache pool's tokens)
KV_CACHE_GAUGES = {"vllm": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
                   "sglang": ("sglang:token_usage",)}


def kv_cache_query(preset: str) -> str:
    """Every model's KV cache usage now (0-1), the mean over its replicas, one series per model
    label (``KV_CACHE_GAUGES``: the newer gauge where a replica exports both names); Triton
    exports none."""
    if preset not in KV_CACHE_GAUGES:
        raise SourceError(f"preset {preset!r} exports no KV cache usage; only "
                          f"{' and '.join(KV_CACHE_GAUGES)} do")
    label = PRESETS[preset].label
    return " or ".join(f"avg by ({label}) ({PRESETS[preset].per_replica(gauge)})"
                       for gauge in KV_CACHE_GAUGES[preset])


def escape(value: str) -> str:
    """A PromQL double-quoted label value."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
