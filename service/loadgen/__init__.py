"""A `sglang.bench_serving`-compatible load generator: async httpx, streaming, same figures and keys.

- `build_prompts`: served traffic (`bench.warm_prompts`), warm-up and measured requests from a workload
  (the simulator's layout, as text).
- `run_load`: served traffic, warm-up, an optional step in between (cache flush, metrics scrape), then the
  measured phase, with a watchdog.
- `bench_figures` / `request_samples`: bench_serving's figures (`BenchFigures`) from request outcomes;
  `json_failures`: the outputs that failed their JSON schema, by kind (`service.loadgen.schemas`).
- `bench_serving_argv` / `bench_serving_warm_argv` / `write_bench_traces` / `read_bench_output`: run SGLang's
  own bench_serving instead, when it is installed.
"""

from service.loadgen.bench_serving import (
    WARM_PROMPTS_SEED_OFFSET,
    bench_module,
    bench_serving_argv,
    bench_serving_warm_argv,
    read_bench_output,
    read_cache_tiers,
    sglang_available,
    write_bench_traces,
)
from service.loadgen.client import PATHS, RequestOutcome, send_request
from service.loadgen.figures import bench_figures, json_failures, peak_concurrency, request_samples
from service.loadgen.prompts import PromptRequest, build_prompts
from service.loadgen.run import LoadAborted, LoadPlan, PhaseResult, run_load

__all__ = ["PATHS", "WARM_PROMPTS_SEED_OFFSET", "LoadAborted", "LoadPlan", "PhaseResult", "PromptRequest",
           "RequestOutcome", "bench_figures", "bench_module", "bench_serving_argv", "bench_serving_warm_argv",
           "build_prompts", "json_failures", "peak_concurrency", "read_bench_output", "read_cache_tiers",
           "request_samples", "run_load", "send_request", "sglang_available", "write_bench_traces"]
