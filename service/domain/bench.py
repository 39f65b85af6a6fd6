"""Benchmark specification and round results, named as `sglang.bench_serving` names them."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

import msgspec

# Tokens per hash id in Mooncake's traces (kvcache-ai/Mooncake FAST25-release: 512-token KV blocks).
TRACE_BLOCK_TOKENS = 512


class TraceRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One request of a trace, in the format of Mooncake's traces and bench_serving's `mooncake` dataset.

    `timestamp` is the arrival in milliseconds (any origin: replay starts at the earliest); `hash_ids` name the
    prompt's KV blocks of `TraceSpec.block_tokens` tokens in order, so two requests share exactly the tokens of
    their common leading ids. `sglang-tuner profile --trace-out` writes such a trace from a request log.
    """

    timestamp: float
    input_length: int
    output_length: int
    hash_ids: list[int] = msgspec.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.input_length < 1 or self.output_length < 1:
            raise ValueError("input_length and output_length must be at least 1 token")
        if any(h < 0 for h in self.hash_ids):
            raise ValueError("hash_ids must be non-negative integers")

    def blocks(self, block_tokens: int) -> list[tuple[int, int]]:
        """(hash id, tokens) of the prompt's blocks, in order: `block_tokens` each, the last one shorter when the
        prompt ends inside it; ids past the prompt's end name nothing, and tokens past the ids' blocks no block."""
        out: list[tuple[int, int]] = []
        left = self.input_length
        for hash_id in self.hash_ids:
            if left <= 0:
                break
            out.append((hash_id, min(block_tokens, left)))
            left -= out[-1][1]
        return out


class TraceSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A request trace to replay: each record is one request, sent at its own time (bench_serving's
    `--dataset-name mooncake`, whose replay ignores `--request-rate`).

    `file` is a JSON-lines trace, relative to the scenario file; loading the scenario reads it into `records`,
    so a stored job or an API request carries the records themselves. `slowdown` stretches the trace's clock
    (bench_serving's `--mooncake-slowdown-factor`: 2.0 replays at half the rate). With `timestamps = false` the
    records are sent as fast as `max_concurrency` allows, closed loop, in time order.
    """

    file: str | None = None
    records: list[TraceRecord] = msgspec.field(default_factory=list)
    block_tokens: int = TRACE_BLOCK_TOKENS
    slowdown: float = 1.0
    timestamps: bool = True

    def __post_init__(self) -> None:
        if self.file is None and not self.records:
            raise ValueError("a trace needs `file` (a JSON-lines trace next to the scenario) or inline `records`")
        if self.block_tokens < 1:
            raise ValueError("block_tokens must be at least 1 (Mooncake's traces use 512)")
        if self.slowdown < 0:
            raise ValueError("slowdown must be 0 or more (1.0 replays at the trace's own rate)")

    def parts(self, served: int, measured: int) -> tuple[list[TraceRecord], list[TraceRecord]]:
        """The records served before the run (the first `served`) and the `measured` ones after them, in file
        order, as bench_serving reads the first lines of a trace."""
        served = max(served, 0)
        return self.records[:served], self.records[served:served + measured]


class MaxLoadSearch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[bench.max_load]`: find the highest load at which the SLO still holds, by a bounded search.

    Each probe is a benchmark at one load (`max_concurrency`, or Poisson `request_rate` in req/s) with the
    round's seed; the SLO holds when every latency target and the failure-rate target are met on the
    probe's figures. The round reports the highest passing probe: its figures, its goodput, and the load as
    `BenchFigures.max_load_under_slo`. At most `probes` probes run: `low`, `high`, then bisection between the
    highest pass and the lowest miss until they are within `tolerance` of each other (one request for
    concurrency).
    """

    over: Literal["concurrency", "request_rate"] = "concurrency"
    low: float = 1.0
    high: float = 256.0
    probes: int = 8
    tolerance: float = 0.05

    def __post_init__(self) -> None:
        if not 0 < self.low < self.high:
            raise ValueError(f"bench.max_load: low ({self.low:g}) must be above 0 and below high ({self.high:g}); "
                             "set low < high")
        if not 2 <= self.probes <= 16:
            raise ValueError(f"bench.max_load.probes is {self.probes}; set 2 to 16 (each probe is one benchmark)")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"bench.max_load.tolerance is {self.tolerance:g}; set a fraction such as 0.05")


class BenchSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One benchmark round, mirroring `python -m sglang.bench_serving` flags.

    `dataset = "trace"` replays `trace` (the first `num_prompts` records, as bench_serving reads the first lines
    of a trace; `warm_prompts` records before them are served first): lengths, shared prefixes and arrival
    times all come from the trace, and `request_rate` is ignored.
    """

    backend: Literal["sglang", "sglang-oai", "sglang-oai-chat"] = "sglang"
    dataset: Literal["workload", "random", "trace"] = "workload"
    num_prompts: int = 500
    max_concurrency: int | None = None
    request_rate: float | None = None
    random_input_len: int | None = None
    random_output_len: int | None = None
    random_range_ratio: float = 0.0
    warmup_requests: int = 30
    seed: int = 42
    flush_cache: bool = False
    repeats: int = 1
    # bench_serving sends ignore_eos=True unless --disable-ignore-eos; a batch client (casebook case 3)
    # sends max_new_tokens and stops at EOS, which lets SGLang's new-token ratio under-reserve KV.
    ignore_eos: bool = True
    max_new_tokens: int | None = None
    # Requests of the workload the server has already served when the measured run starts (excluded from
    # the figures): a live service's prefix cache is warm, a freshly started server's is empty. Not
    # bench_serving's --warmup-requests, which repeats the first prompt.
    warm_prompts: int = 0
    trace: TraceSpec | None = None
    max_load: MaxLoadSearch | None = None

    def __post_init__(self) -> None:
        if self.dataset == "trace" and self.trace is None:
            raise ValueError('dataset "trace" needs a [bench.trace] table with `file` or `records`')
        if self.trace is not None and self.dataset != "trace":
            raise ValueError(f'a trace is given but dataset is "{self.dataset}": set dataset = "trace" to replay it')


class Source(StrEnum):
    """Where a figure came from: users decide on GPUs by these numbers."""

    SIMULATED = "simulated"
    EMULATED = "emulated"
    MEASURED = "measured"


class ProcessRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One process a runner started for a round: enough to find it again and never to mistake another for it.

    A PID is reused once its process exits, so the process is named by `pid` with `start_time` (clock ticks
    after boot, field 22 of `/proc/<pid>/stat`); `pgid` is the process group holding its children.
    """

    name: str
    kind: str = "worker"
    pid: int = 0
    pgid: int = 0
    start_time: int = 0
    host: str = ""
    port: int = 0
    argv: list[str] = msgspec.field(default_factory=list)


class PlacementRecord(msgspec.Struct, frozen=True, kw_only=True):
    """Where one worker process of a round ran on a cluster: the node and the GPUs it was given."""

    worker: str
    node_id: str = ""
    node_ip: str = ""
    gpus: list[str] = msgspec.field(default_factory=list)
    placement_group: str = ""
    bundle: int = 0


class Provenance(msgspec.Struct, kw_only=True):
    """How a round's figures were obtained."""

    source: Source
    runner: str
    cost_model: str | None = None
    cost_model_fallback_steps: int = 0
    cost_model_steps: int = 0
    # What answered the steps, from the bound step models' `describe()`: the data source, any mapping to a
    # similar model, and what was priced analytically in place of measured ops (one entry per distinct
    # answer, " | "-joined with the worker roles in front when a round has more than one).
    cost_model_detail: str = ""
    # The stored calibration whose corrections the cost model's answers carry (its id), if any.
    calibration: str | None = None
    sglang_version: str | None = None
    # The traffic seed of this repeat, stamped by the engine: repeats of two rounds with the same seed saw
    # the same prompts, so a policy may compare them pair by pair.
    seed: int | None = None
    note: str = ""
    # What the runner started for the round (the `local` runner's workers and router), in launch order.
    processes: list[ProcessRecord] = msgspec.field(default_factory=list)
    # Which cluster node and GPUs ran which worker (the `ray` runner), in launch order.
    placement: list[PlacementRecord] = msgspec.field(default_factory=list)


class BenchFigures(msgspec.Struct, kw_only=True, omit_defaults=False):
    """`sglang.bench_serving` output-file keys (0.5.23), plus `max_itl_ms`."""

    completed: int = 0
    duration: float = 0.0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    request_throughput: float = 0.0
    input_throughput: float = 0.0
    output_throughput: float = 0.0
    total_throughput: float = 0.0
    mean_e2e_latency_ms: float = 0.0
    median_e2e_latency_ms: float = 0.0
    p90_e2e_latency_ms: float = 0.0
    p95_e2e_latency_ms: float = 0.0
    p99_e2e_latency_ms: float = 0.0
    mean_ttft_ms: float = 0.0
    median_ttft_ms: float = 0.0
    p90_ttft_ms: float = 0.0
    p95_ttft_ms: float = 0.0
    p99_ttft_ms: float = 0.0
    mean_tpot_ms: float = 0.0
    median_tpot_ms: float = 0.0
    p90_tpot_ms: float = 0.0
    p95_tpot_ms: float = 0.0
    p99_tpot_ms: float = 0.0
    mean_itl_ms: float = 0.0
    median_itl_ms: float = 0.0
    p90_itl_ms: float = 0.0
    p95_itl_ms: float = 0.0
    p99_itl_ms: float = 0.0
    max_itl_ms: float = 0.0
    concurrency: float = 0.0
    accept_length: float | None = None
    max_concurrent_requests: int = 0
    # `--goodput` (bench_serving 0.5.23): the requests that succeeded and met every per-request SLO
    # threshold (`service.domain.slo.goodput_slos`), per second and as a share of the requests sent.
    request_goodput: float | None = None
    slo_attainment: float | None = None
    goodput_slos_ms: dict[str, float] | None = None
    # `[bench.max_load]`: the highest load probed at which the SLO held (concurrency or req/s), None when
    # it failed even at the lowest probe.
    max_load_under_slo: float | None = None


class ServerMetrics(msgspec.Struct, kw_only=True):
    """Server-side figures, named as SGLang's Prometheus metrics (`sglang:` prefix dropped)."""

    token_usage: float = 0.0
    cache_hit_rate: float = 0.0
    num_queue_reqs: float = 0.0
    num_running_reqs: float = 0.0
    num_retracted_requests_total: int = 0
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None
    grammar_compile_time_mean_ms: float | None = None
    grammar_compile_time_p99_ms: float | None = None
    grammar_cache_hit_rate: float | None = None
    # Cached prompt tokens by tier over all prompt tokens of the round (`sglang:cached_tokens_total`
    # by `cache_source`: device, host, storage; `total` when the server gave no breakdown).
    cache_hit_rate_by_tier: dict[str, float] | None = None
    # `sglang:eplb_balancedness` (mean over the round's forward passes of mean/max expert load per GPU,
    # 1.0 = balanced); only from servers launched with its report on (the renderer turns it on under EP).
    eplb_balancedness: float | None = None
    # `sglang:dp_attention_token_imbalance_ratio` (0.5.23): mean of max/mean tokens over the DP ranks.
    dp_attention_imbalance: float | None = None
    # PD disaggregation: mean KV transfer latency and speed of the round (`sglang:kv_transfer_*`).
    kv_transfer_latency_ms: float | None = None
    kv_transfer_speed_gb_s: float | None = None
    # Counter figures the round could not measure (a `/metrics` scrape failed): named, never guessed.
    missing: list[str] = msgspec.field(default_factory=list)


class RequestSamples(msgspec.Struct, kw_only=True):
    """Per-request figures, kept so decisions can compare distributions, not just means."""

    ttft_ms: list[float] = msgspec.field(default_factory=list)
    e2e_ms: list[float] = msgspec.field(default_factory=list)
    tpot_ms: list[float] = msgspec.field(default_factory=list)
    output_tokens: list[int] = msgspec.field(default_factory=list)


class RoundStatus(StrEnum):
    OK = "ok"
    PARTIAL = "partial"
    FAILED = "failed"


class RoundResult(msgspec.Struct, kw_only=True):
    """Everything one benchmark round measured, and where it came from."""

    status: RoundStatus
    provenance: Provenance
    bench: BenchFigures = msgspec.field(default_factory=BenchFigures)
    server: ServerMetrics = msgspec.field(default_factory=ServerMetrics)
    failure_rate: float = 0.0
    expert_imbalance: float | None = None
    cost_per_1m_output_tokens: float | None = None
    samples: RequestSamples = msgspec.field(default_factory=RequestSamples)
    error: str | None = None
    error_phase: str | None = None
    # The configuration itself failed (weights or CUDA graphs that do not fit, a flag refused before launch, no
    # engine or router installed): launching it again fails the same way, so it is not retried.
    config_fault: bool = False
    notes: list[str] = msgspec.field(default_factory=list)
