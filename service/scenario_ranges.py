"""Value ranges of a scenario: counts, rates, fractions and sizes that no benchmark or server can run with.

The decoder checks types; these checks catch the values of the right type that make no sense, such as a
negative `bench.max_concurrency` (which would start servers and then crash the load generator) or a
`mem-fraction-static` of 1.2. Each returns `ValidationIssue`s naming the field as it is spelled in a
scenario file, and never raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from service.domain import BenchSpec, Hardware, LengthDist, RouterConfig, Scenario, ServerConfig, WorkloadProfile
from service.sglang.values import ValidationIssue


@dataclass(frozen=True)
class Range:
    """An allowed interval; `open_low`/`open_high` exclude the bound itself."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    infinite_ok: bool = False

    def holds(self, value: float) -> bool:
        if math.isnan(value) or (math.isinf(value) and not self.infinite_ok):
            return False
        if self.low is not None and (value < self.low or (self.open_low and value == self.low)):
            return False
        return self.high is None or not (value > self.high or (self.open_high and value == self.high))

    def words(self) -> str:
        low = None if self.low is None else f"{'above' if self.open_low else 'at least'} {self.low:g}"
        high = None if self.high is None else f"{'below' if self.open_high else 'at most'} {self.high:g}"
        if low and high and not (self.open_low or self.open_high):
            return f"between {self.low:g} and {self.high:g}"
        return " and ".join(part for part in (low, high) if part) or "a finite number"


AT_LEAST_1 = Range(low=1)
AT_LEAST_0 = Range(low=0)
POSITIVE = Range(low=0, open_low=True)
FRACTION = Range(low=0, high=1)
OPEN_FRACTION = Range(low=0, high=1, open_low=True, open_high=True)
PORT = Range(low=1, high=65535)

Check = tuple[str, float | None, Range, str]  # field, value, allowed range, fix hint ("" for the generic one)


def out_of_range(checks: list[Check]) -> list[ValidationIssue]:
    """An issue for every set value outside its range (None means unset and is not checked)."""
    issues = []
    for field, value, allowed, hint in checks:
        if value is None or allowed.holds(float(value)):
            continue
        finite = "" if math.isfinite(value) else "a finite number "
        issues.append(ValidationIssue(field=field, message=f"{field.rsplit('.', 1)[-1]} is {value!r}; it must be "
                                                           f"{finite}{allowed.words()}",
                                      hint=hint or f"give a value {allowed.words()}"))
    return issues


def check_ranges(scenario: Scenario) -> list[ValidationIssue]:
    """Every value range of a scenario: bench, workload, hardware, SLO, objective, servers and router."""
    issues = out_of_range(bench_checks(scenario.bench) + workload_checks(scenario.workload)
                          + hardware_checks(scenario.hardware) + slo_checks(scenario) + router_checks(scenario))
    for index, group in enumerate(scenario.deployment.groups):
        issues += out_of_range(server_checks(f"deployment.groups[{index}].server", group.server))
        issues += _chunked_prefill(f"deployment.groups[{index}].server", group.server)
    return (issues + _length_order(scenario.workload) + _documents(scenario.workload) + _max_load(scenario)
            + _latency_units(scenario) + _clients_past_prompts(scenario.bench) + _opening_burst(scenario)
            + _stated_sharing(scenario) + _deadline_size(scenario))


def _max_load(scenario: Scenario) -> list[ValidationIssue]:
    """A max-load search needs a target to hold: a latency percentile or the failure rate."""
    if scenario.bench.max_load is None:
        return []
    slo = scenario.slo
    held = (slo.ttft_p95_ms, slo.ttft_p99_ms, slo.ttft_median_ms, slo.itl_median_ms, slo.itl_p99_ms,
            slo.e2e_p95_ms, slo.failure_rate_max)
    if any(target is not None for target in held):
        return []
    return [ValidationIssue(field="bench.max_load",
                            message="a max-load search finds the highest load at which the SLO holds, but [slo] "
                                    "sets no latency or failure-rate target",
                            hint="set one in [slo], e.g. ttft_p95_ms = 1000, or drop [bench.max_load]")]


# No SGLang forward pass on any GPU takes under a millisecond with a model loaded (a decode step of a small
# model on an H200 is about 1 ms, a prefill more), and a first token needs a whole prefill: a TTFT or
# end-to-end target below it cannot be met by any deployment. ITL is left out: under speculative decoding a
# step emits several tokens, and a median ITL under a millisecond is real.
LATENCY_FLOOR_MS = 1.0
FLOORED_TARGETS = ("ttft_p95_ms", "ttft_p99_ms", "ttft_median_ms", "e2e_p95_ms")


def _latency_units(scenario: Scenario) -> list[ValidationIssue]:
    """A TTFT or end-to-end target under a millisecond: almost always seconds written where milliseconds are
    read."""
    issues = []
    for name in FLOORED_TARGETS:
        value = getattr(scenario.slo, name)
        if value is None or not 0 < value < LATENCY_FLOOR_MS:
            continue
        issues.append(ValidationIssue(
            field=f"slo.{name}", severity="warning",
            message=f"{name} is {value:g} ms: no forward pass of a loaded model takes under a millisecond, so no "
                    "deployment can meet it and every round would miss it",
            hint=f"SLO latencies are in milliseconds: for {value:g} s write {name} = {value * 1000:g}"))
    return issues


def _clients_past_prompts(bench: BenchSpec) -> list[ValidationIssue]:
    """A concurrency cap above the prompts of a round: every prompt is in flight at once, the cap never binds."""
    if bench.max_concurrency is None or bench.trace is not None or bench.max_concurrency <= bench.num_prompts:
        return []
    return [ValidationIssue(
        field="bench.max_concurrency", severity="warning",
        message=f"max_concurrency {bench.max_concurrency} is above num_prompts {bench.num_prompts}: every prompt "
                "of a round is sent at once, and the round ends before a steady state at that load",
        hint=f"send several times the concurrency in prompts (num_prompts >= {4 * bench.max_concurrency}), or lower "
             "max_concurrency to the load the service sees")]


# TTFT targets by the share of requests above their percentile.
TAIL_TARGETS = {"ttft_p95_ms": ("p95", 0.05), "ttft_p99_ms": ("p99", 0.01)}


def _opening_burst(scenario: Scenario) -> list[ValidationIssue]:
    """A TTFT percentile target decided by the round's opening burst.

    bench_serving with no request rate sends `max_concurrency` requests at once when the round starts (after
    the warm-up), so they queue behind each other's prefills; when they are more than the share of requests
    above a TTFT target's percentile, that percentile measures the burst, not steady traffic at the same
    concurrency (gpt-oss-20b on one H100 at 96 clients: p95 TTFT 3,379 ms over 600 prompts, 319 ms over
    2,000, simulated), and a job would buy GPUs for a start-up queue.
    """
    bench = scenario.bench
    clients = bench.max_concurrency
    paced = bench.request_rate is not None and math.isfinite(bench.request_rate)
    if clients is None or paced or bench.trace is not None or bench.max_load is not None \
            or clients > bench.num_prompts:
        return []
    issues = []
    for name, (label, tail) in TAIL_TARGETS.items():
        if getattr(scenario.slo, name) is None or clients <= tail * bench.num_prompts:
            continue
        needed = math.ceil(clients / tail)
        issues.append(ValidationIssue(
            field="bench.num_prompts", severity="warning",
            message=f"a round sends its first {clients} requests (max_concurrency) at once, "
                    f"{clients / bench.num_prompts:.0%} of its {bench.num_prompts} prompts, so the {label} TTFT that "
                    f"slo.{name} is judged on falls among requests waiting for each other's prefills: it "
                    f"measures that opening burst more than steady traffic at {clients} clients",
            hint=f"send num_prompts >= {needed} ({1 / tail:g}x max_concurrency) so the burst stays within the "
                 f"{tail:.0%} of requests above {label}, or pace arrivals with bench.request_rate"))
    return issues


def bench_checks(bench: BenchSpec) -> list[Check]:
    """bench_serving's counts and rates (`--num-prompts`, `--max-concurrency`, `--request-rate`, ...)."""
    checks: list[Check] = [
        ("bench.num_prompts", bench.num_prompts, AT_LEAST_1, "a round sends 1 or more requests (the casebook uses 500)"),
        ("bench.max_concurrency", bench.max_concurrency, AT_LEAST_1,
         "bench_serving's --max-concurrency caps the requests in flight: give 1 or more, or leave it out"),
        ("bench.request_rate", bench.request_rate, Range(low=0, open_low=True, infinite_ok=True),
         "requests per second above 0 (inf sends them all at once), or leave it out"),
        ("bench.random_input_len", bench.random_input_len, AT_LEAST_1, ""),
        ("bench.random_output_len", bench.random_output_len, AT_LEAST_1, ""),
        ("bench.random_range_ratio", bench.random_range_ratio, FRACTION, ""),
        ("bench.warmup_requests", bench.warmup_requests, AT_LEAST_0, ""),
        ("bench.repeats", bench.repeats, AT_LEAST_1, ""),
        ("bench.max_new_tokens", bench.max_new_tokens, AT_LEAST_1, ""),
        ("bench.warm_prompts", bench.warm_prompts, AT_LEAST_0, ""),
    ]
    if bench.trace is not None:
        checks.append(("bench.trace.slowdown", bench.trace.slowdown, Range(low=0), ""))
    return checks


def workload_checks(workload: WorkloadProfile) -> list[Check]:
    """Lengths, rates, shares and probabilities of the traffic profile."""
    prefix, structured = workload.prefix, workload.structured_output
    checks: list[Check] = [*_length("workload.input", workload.input), *_length("workload.output", workload.output)]
    checks += [
        ("workload.prefix_sharing_rate", workload.prefix_sharing_rate, FRACTION, "a share of prompt tokens, 0 to 1"),
        ("workload.peak_concurrency", workload.peak_concurrency, AT_LEAST_1,
         "the most requests in flight at the peak: 1 or more, or leave it out"),
        ("workload.request_rate", workload.request_rate, POSITIVE, ""),
        ("workload.peak_request_rate", workload.peak_request_rate, POSITIVE, ""),
        ("workload.total_requests", workload.total_requests, AT_LEAST_1, ""),
        ("workload.prefix.system_prompt_tokens", prefix.system_prompt_tokens, AT_LEAST_0, ""),
        ("workload.prefix.tool_definition_tokens", prefix.tool_definition_tokens, AT_LEAST_0, ""),
        ("workload.prefix.history_tokens", prefix.history_tokens, AT_LEAST_0, ""),
        ("workload.prefix.variable_tokens", prefix.variable_tokens, AT_LEAST_0, ""),
        ("workload.prefix.conversations", prefix.conversations, AT_LEAST_0, ""),
        ("workload.prefix.variable_period_s", prefix.variable_period_s, POSITIVE, ""),
        ("workload.structured_output.schemas", structured.schemas, AT_LEAST_0, ""),
        ("workload.structured_output.structural_token_fraction", structured.structural_token_fraction, FRACTION, ""),
        ("workload.structured_output.prompt_only_failure_rate", structured.prompt_only_failure_rate, FRACTION, ""),
        ("workload.speculative.draft_acceptance", workload.speculative.draft_acceptance, FRACTION,
         "a per-token acceptance probability, 0 to 1"),
    ]
    documents = prefix.documents
    if documents is not None:
        checks += [("workload.prefix.documents.count", documents.count, AT_LEAST_1, ""),
                   ("workload.prefix.documents.tokens", documents.tokens, AT_LEAST_1, ""),
                   ("workload.prefix.documents.popular", documents.popular, AT_LEAST_0, ""),
                   ("workload.prefix.documents.popular_share", documents.popular_share, FRACTION, "")]
    return checks


def _length(field: str, dist: LengthDist) -> list[Check]:
    return [(f"{field}.median", dist.median, AT_LEAST_1, "a token length of 1 or more"),
            (f"{field}.p95", dist.p95, AT_LEAST_1, ""),
            (f"{field}.minimum", dist.minimum, AT_LEAST_1, ""),
            (f"{field}.maximum", dist.maximum, AT_LEAST_1, ""),
            (f"{field}.range_ratio", dist.range_ratio, FRACTION, "")]


def _length_order(workload: WorkloadProfile) -> list[ValidationIssue]:
    """A p95 below the median, or a maximum below the minimum, describes no distribution."""
    issues = []
    for name, dist in (("input", workload.input), ("output", workload.output)):
        if dist.p95 is not None and 1 <= dist.p95 < dist.median:
            issues.append(ValidationIssue(field=f"workload.{name}.p95",
                                          message=f"p95 {dist.p95} is below the median {dist.median}",
                                          hint="a 95th percentile is at least the median: swap or correct them"))
        if dist.maximum is not None and 1 <= dist.maximum < dist.minimum:
            issues.append(ValidationIssue(field=f"workload.{name}.maximum",
                                          message=f"maximum {dist.maximum} is below the minimum {dist.minimum}",
                                          hint="raise maximum, or lower minimum"))
    return issues


def _deadline_size(scenario: Scenario) -> list[ValidationIssue]:
    """A completion deadline with no batch to complete: every round would read `deadline_hours` as unmeasured
    and the job could only end missing it. (The `deadline` objective alone ranks by output throughput.)"""
    slo, workload = scenario.slo, scenario.workload
    if slo.deadline_hours is None or slo.deadline_output_tokens is not None:
        return []
    field = "slo.deadline_hours"
    lengths = workload.output.quantiles()
    mean = sum(lengths) / len(lengths)
    if workload.total_requests:
        tokens = workload.total_requests * mean
        fix = (f"set slo.deadline_output_tokens = {tokens:.3g} (workload.total_requests {workload.total_requests:,} "
               f"x about {mean:,.0f} output tokens each, the mean of workload.output)")
    else:
        fix = ("set slo.deadline_output_tokens to the batch's output tokens (its requests x their mean output), "
               "as casebook case 3 does: 2.4M requests x 150 = 3.6e8")
    return [ValidationIssue(
        field=field,
        message="a completion deadline is judged on the hours the batch's output tokens take at a round's output "
                "throughput, but slo.deadline_output_tokens is not set: no round could measure it",
        hint=fix)]


# A stated sharing rate this far from what the prompt structure shares is two different workloads.
SHARING_MISMATCH = 0.15


def _stated_sharing(scenario: Scenario) -> list[ValidationIssue]:
    """A stated prefix sharing rate the prompts of a round do not have.

    The techniques read `prefix_sharing_rate` (cache_aware routing at 0.2, HiCache's write policy), but a
    round's prompts are built from `workload.prefix`: a rate of 0.3 over a structure with no shared part
    proposes cache changes that the rounds measure on prompts sharing nothing.
    """
    workload, bench = scenario.workload, scenario.bench
    stated = workload.prefix_sharing_rate
    if stated is None or bench.dataset != "workload" or not 0 <= stated <= 1:
        return []
    built = workload.structure_sharing(bench.num_prompts)
    if abs(stated - built) < SHARING_MISMATCH:
        return []
    return [ValidationIssue(
        field="workload.prefix_sharing_rate", severity="warning",
        message=f"prefix_sharing_rate is {stated:g}, but the prompts a round builds from workload.prefix share "
                f"{built:.2f} of their tokens: cache and routing changes are proposed for {stated:g} and measured "
                f"on {built:.2f}",
        hint="describe the shared parts in workload.prefix (system_prompt_tokens, tool_definition_tokens, "
             f"documents, history_tokens with conversations) until they share about {stated:g}, or leave "
             "prefix_sharing_rate out to read the rate from them")]


def _documents(workload: WorkloadProfile) -> list[ValidationIssue]:
    documents = workload.prefix.documents
    if documents is None or documents.popular <= documents.count:
        return []
    return [ValidationIssue(field="workload.prefix.documents.popular",
                            message=f"{documents.popular} popular documents of {documents.count}",
                            hint="the popular documents are a subset of the corpus: at most `count`")]


def hardware_checks(hardware: Hardware) -> list[Check]:
    """The cluster's sizes and prices."""
    return [("hardware.gpus_per_node", hardware.gpus_per_node, AT_LEAST_1, "GPUs in one node, 1 or more (often 8)"),
            ("hardware.nodes", hardware.nodes, AT_LEAST_1, "1 or more nodes"),
            ("hardware.host_dram_gb", hardware.host_dram_gb, AT_LEAST_0, ""),
            ("hardware.interconnect_gbps", hardware.interconnect_gbps, POSITIVE, ""),
            ("hardware.price_per_gpu_hour", hardware.price_per_gpu_hour, AT_LEAST_0, ""),
            ("hardware.host_cpus", hardware.host_cpus, AT_LEAST_1, "")]


def slo_checks(scenario: Scenario) -> list[Check]:
    """SLO targets are positive; a failure rate is a fraction; an objective's target is positive."""
    slo, objective = scenario.slo, scenario.objective
    checks: list[Check] = [(f"slo.{name}", getattr(slo, name), POSITIVE, "a target above 0, or leave it out")
                           for name in slo.__struct_fields__ if name != "failure_rate_max"]
    checks.append(("slo.failure_rate_max", slo.failure_rate_max, FRACTION, "a share of requests, 0 to 1"))
    target_range = FRACTION if objective.kind == "failure_rate" else POSITIVE
    checks.append(("objective.target", objective.target, target_range, ""))
    return checks


def server_checks(field: str, server: ServerConfig) -> list[Check]:
    """Typed SGLang settings with a range SGLang itself enforces or that no server can start with."""
    return [
        (f"{field}.mem-fraction-static", server.mem_fraction_static, OPEN_FRACTION,
         "the share of GPU memory for weights and KV, above 0 and below 1 (the casebook uses 0.88 to 0.94)"),
        (f"{field}.max-running-requests", server.max_running_requests, AT_LEAST_1, ""),
        (f"{field}.max-prefill-tokens", server.max_prefill_tokens, AT_LEAST_1, ""),
        (f"{field}.schedule-conservativeness", server.schedule_conservativeness, POSITIVE, ""),
        (f"{field}.page-size", server.page_size, AT_LEAST_1, "tokens per KV page, 1 or more (64 with HiCache)"),
        (f"{field}.hicache-ratio", server.hicache_ratio, POSITIVE, "the host pool's size over the GPU pool's, e.g. 2"),
        (f"{field}.hicache-size", server.hicache_size, AT_LEAST_0, ""),
        (f"{field}.speculative-num-steps", server.speculative_num_steps, AT_LEAST_1, ""),
        (f"{field}.speculative-eagle-topk", server.speculative_eagle_topk, AT_LEAST_1, ""),
        (f"{field}.speculative-num-draft-tokens", server.speculative_num_draft_tokens, AT_LEAST_1, ""),
        (f"{field}.cuda-graph-max-bs", server.cuda_graph_max_bs, AT_LEAST_1, ""),
        (f"{field}.eplb-rebalance-num-iterations", server.eplb_rebalance_num_iterations, AT_LEAST_1, ""),
        (f"{field}.ep-num-redundant-experts", server.ep_num_redundant_experts, AT_LEAST_0, ""),
    ]


def _chunked_prefill(field: str, server: ServerConfig) -> list[ValidationIssue]:
    size = server.chunked_prefill_size
    # SGLang reads -1 as "no chunking" (srt/server_args.py); 0 and other negatives mean nothing.
    if size is None or size == -1 or size >= 1:
        return []
    return [ValidationIssue(field=f"{field}.chunked-prefill-size", flag="--chunked-prefill-size",
                            message=f"chunked-prefill-size is {size}; it must be 1 or more, or -1 to turn chunking off",
                            hint="the casebook uses 4096 for latency and 8192 to 32768 for throughput")]


def router_checks(scenario: Scenario) -> list[Check]:
    router: RouterConfig | None = scenario.deployment.router
    if router is None:
        return []
    return [("deployment.router.port", router.port, PORT, ""),
            ("deployment.router.prometheus_port", router.prometheus_port, PORT, ""),
            ("deployment.router.cache_threshold", router.cache_threshold, FRACTION, ""),
            ("deployment.router.balance_abs_threshold", router.balance_abs_threshold, AT_LEAST_0, ""),
            ("deployment.router.balance_rel_threshold", router.balance_rel_threshold, POSITIVE, "")]
