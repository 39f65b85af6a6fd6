"""The casebook's diagnosis rules, quoted, with the thresholds that turn them into checks.

Each `Rule` quotes the casebook sentence a finding applies and names the section it comes from, so a
reader can check the diagnosis against the book rather than against this code.
"""

from __future__ import annotations

import msgspec

# Technique names, as the technique plugins register them.
CHUNKED_PREFILL = "chunked_prefill"
QUANTIZATION = "quantization"
SPECULATIVE_DECODING = "speculative_decoding"
PARALLELISM = "parallelism"
ROUTER_POLICY = "router_policy"
HICACHE = "hicache"
GRAMMAR = "grammar"
MOE_PARALLELISM = "moe_parallelism"
PD_DISAGGREGATION = "pd_disaggregation"
BATCH_PARAMETERS = "batch_parameters"
MODEL_SELECTION = "model_selection"
PROMPT_STRUCTURE = "prompt_structure"

# Reading order 1: at or above this share of --max-concurrency the limit is reached; below the light
# share, "system resources are ample and load is light".
CONCURRENCY_AT_LIMIT = 0.95
CONCURRENCY_LIGHT = 0.5
# Reading order 2: "If the ratio is 3x or more".
TTFT_TAIL_RATIO = 3.0
# Reading order 3: "several hundred ms"; case 1's stall was 982 ms, its fixed round 118 ms.
ITL_STALL_MS = 300.0
# Server metrics: "token_usage normal range is 0.5~0.85; approaching 1.0 signifies KV cache saturation";
# case 3 calls 0.93 "almost saturated" and says to watch "token_usage above 0.95".
TOKEN_USAGE_FULL = 0.9
TOKEN_USAGE_PREEMPTION = 0.95
# "num_queue_reqs being close to 0 is normal": one waiting request on average is a queue.
QUEUE_BUILDING = 1.0
UTILIZATION_LOW = 0.5
# "well below the sharing rate": case 2's 0.62 vs 0.81 is a gap; case 1's 0.31 vs 0.35 is not.
CACHE_GAP = 0.10
# Case 3 turned EAGLE3 off at 2.14 accepted of 6 (rate 0.357); case 1 kept it at 3.82 (rate 0.637).
SPEC_ACCEPT_LENGTH_LOW = 2.5
SPEC_ACCEPT_RATE_LOW = 0.5
# "GPU 5, handling expert 47, was constantly busy": the MoE share of every step waits for the busiest
# GPU rank. SGLang's eplb_balancedness is mean/max load per rank; below 0.8 the busiest rank carries 25%
# more than the average.
EPLB_BALANCEDNESS_LOW = 0.8
# Tuning order: model selection gains "up to several times", parallelisation "2-3x"; a shortfall of 3x
# or more is beyond what configuration alone recovers.
MODEL_SELECTION_SHORTFALL = 3.0


class Rule(msgspec.Struct, frozen=True):
    """A casebook sentence and where it is written."""

    text: str
    source: str


CONCURRENCY_OVER = Rule(
    "If Concurrency is higher than Max request concurrency, it means the server cannot handle all requests "
    "(queue or memory issue).",
    "Benchmark Execution, reading order 1",
)
CONCURRENCY_LOW = Rule(
    "If Concurrency is low compared to max, it means system resources are ample and load is light.",
    "Benchmark Execution, reading order 1",
)
TTFT_RATIO = Rule(
    "Median TTFT vs p99 TTFT -> If the ratio is 3x or more, suspect blocking by long prompts or chunked prefill.",
    "Benchmark Execution, reading order 2",
)
ITL_STALL = Rule(
    "If Max ITL is several hundred ms, the scheduler is stalled at a specific step; preemption or prefill "
    "insertion is the cause.",
    "Benchmark Execution, reading order 3",
)
THROUGHPUT_BASELINE = Rule(
    "Output token throughput -> Cost metric, baseline for comparison between tuning rounds.",
    "Benchmark Execution, reading order 4",
)
KV_SHORTAGE = Rule(
    "If token_usage is close to 1.0 and num_queue_reqs is also high, KV cache shortage is the bottleneck.",
    "Server Metrics",
)
KV_SATURATION = Rule(
    "token_usage normal range is 0.5~0.85; approaching 1.0 signifies KV cache saturation -> preemption.",
    "Server Metrics",
)
SCHEDULING = Rule(
    "If GPU utilization is low but the queue is long, it's a scheduling issue. Distinguishing these two is "
    "the starting point for diagnosis.",
    "Server Metrics",
)
COMPUTE_BOUND = Rule(
    "token_usage of 0.79 means there's headroom in the KV cache, but the queue is building up. The bottleneck "
    "is computation and communication, not memory.",
    "Large-scale MoE Serving, Round 0",
)
CACHE_BELOW_SHARING = Rule(
    "cache_hit_rate: Normal range depends on the workload; if it's low compared to the sharing rate, it "
    "indicates a prompt design issue (poor caching, variable values at the beginning).",
    "Server Metrics",
)
CACHE_EVICTIONS = Rule(
    "The cache hit rate of 0.62 is below the sharing rate of 0.81, with the 0.19 difference being lost to "
    "evictions. ... Routing policy becomes part of the caching strategy.",
    "Document QA / RAG, Round 0 and Lessons Learned",
)
RETRACTIONS = Rule(
    "Preemption occurs, actually slowing it down. Preempted requests are recomputed from scratch, wasting "
    "work. ... Monitor preempting warnings and token_usage above 0.95.",
    "Nightly Batch, Round 3 and Lessons Learned",
)
EXPERT_IMBALANCE = Rule(
    "Expert 47 was chosen 7.2 times more often than average. GPU 5, handling expert 47, was constantly busy, "
    "while GPU 28, handling expert 231, was idle. ... Enable EPLB to replicate popular experts across multiple "
    "GPUs.",
    "Large-scale MoE Serving, Round 2",
)
SPEC_ACCEPT = Rule(
    "Proposing 6 tokens and only accepting 2.14 while spending 28% of the cost means it's better to turn it off.",
    "Nightly Batch, Round 2",
)
FAILURE_RATE = Rule(
    "Failure rate is a constraint that takes precedence over latency. ... These are probabilistic failures "
    "that remain no matter how much the prompt is refined.",
    "Structured Output API, Requirements and Round 0",
)
TTFT_SLO = Rule(
    "Chunked prefill should always be enabled if there's a latency SLO. It trades 3-4% throughput for over "
    "60% tail latency reduction.",
    "In-house Coding Assistant, Summary",
)
ITL_SLO = Rule(
    "All metrics improved simultaneously. This is because this region is memory-bound. ... halving the bytes "
    "read at each decode step.",
    "In-house Coding Assistant, Round 2",
)
DEADLINE = Rule(
    "Model selection yields greater gains than the sum of all configuration tuning. ... Throughput in batch "
    "jobs is strongly inversely proportional to model size.",
    "Nightly Batch, Round 1 and Lessons Learned",
)
PEAK = Rule(
    "Compared to the peak of 140 req/s, 71.28 req/s is half, which is insufficient.",
    "Large-scale MoE Serving, Round 0",
)
