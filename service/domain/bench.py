"""Benchmark specification and round results, named as `sglang.bench_serving` names them."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

import msgspec


class BenchSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One benchmark round, mirroring `python -m sglang.bench_serving` flags."""

    backend: Literal["sglang", "sglang-oai", "sglang-oai-chat"] = "sglang"
    dataset: Literal["workload", "random"] = "workload"
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


class Source(StrEnum):
    """Where a figure came from: users decide on GPUs by these numbers."""

    SIMULATED = "simulated"
    EMULATED = "emulated"
    MEASURED = "measured"


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
    sglang_version: str | None = None
    # The traffic seed of this repeat, stamped by the engine: repeats of two rounds with the same seed saw
    # the same prompts, so a policy may compare them pair by pair.
    seed: int | None = None
    note: str = ""


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
    notes: list[str] = msgspec.field(default_factory=list)
