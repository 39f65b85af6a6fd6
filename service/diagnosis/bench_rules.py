"""Reading order steps 1-4: what the bench_serving block alone says (casebook, Benchmark Execution)."""

from __future__ import annotations

from service.diagnosis import casebook as cb
from service.diagnosis.findings import Evidence, Finding
from service.diagnosis.observed import Observed


def concurrency_vs_limit(obs: Observed) -> Finding | None:
    """Step 1: Concurrency against Max request concurrency."""
    concurrency, limit = obs.figure("concurrency"), obs.bench.max_concurrency
    if concurrency is None or not limit:
        return None
    share = concurrency / limit
    evidence: Evidence = {"concurrency": concurrency, "max_concurrency": limit, "share_of_limit": round(share, 3)}
    if share > 1.0:
        return Finding(
            id="concurrency_over_limit", step=1, severity="warning", kind="symptom",
            title=f"Concurrency {concurrency:g} exceeds the limit {limit}: the server cannot keep up "
                  "(a queue or memory problem; the server metrics tell which).",
            evidence=evidence, rule=cb.CONCURRENCY_OVER.text, source=cb.CONCURRENCY_OVER.source,
        )
    if share >= cb.CONCURRENCY_AT_LIMIT:
        return Finding(
            id="concurrency_at_limit", step=1, severity="info", kind="reading",
            title=f"Concurrency {concurrency:g} is {share:.0%} of the limit {limit}: requests stay in flight for "
                  "the whole run; num_queue_reqs and token_usage tell whether the server keeps up.",
            evidence=evidence, rule=cb.CONCURRENCY_OVER.text, source=cb.CONCURRENCY_OVER.source,
        )
    if share < cb.CONCURRENCY_LIGHT:
        return Finding(
            id="light_load", step=1, severity="info", kind="reading",
            title=f"Concurrency {concurrency:g} is only {share:.0%} of the limit {limit}: resources are ample "
                  "and the load is light.",
            evidence=evidence, rule=cb.CONCURRENCY_LOW.text, source=cb.CONCURRENCY_LOW.source,
        )
    return None


def ttft_tail_ratio(obs: Observed) -> Finding | None:
    """Step 2: p99 over median TTFT of 3x or more means long prompts block short ones."""
    median, p99 = obs.figure("median_ttft_ms"), obs.figure("p99_ttft_ms")
    if not median or p99 is None:
        return None
    ratio = p99 / median
    if ratio < cb.TTFT_TAIL_RATIO:
        return None
    evidence: dict[str, float | int | str | None] = {
        "median_ttft_ms": median, "p99_ttft_ms": p99, "p99_over_median": round(ratio, 2),
    }
    title = f"P99 TTFT {p99:,.2f} ms is {ratio:.1f}x the median {median:,.2f} ms: long prompts block short ones."
    profile = obs.profile
    if profile is not None and profile.input.p95:
        spread = profile.input.p95 / profile.input.median
        evidence |= {"input_median": profile.input.median, "input_p95": profile.input.p95}
        title += f" The profile agrees: input p95 is {spread:.0f}x the median."
    return Finding(
        id="ttft_tail_blocking", step=2, severity="warning", kind="cause", title=title, evidence=evidence,
        rule=cb.TTFT_RATIO.text, source=cb.TTFT_RATIO.source, technique=cb.CHUNKED_PREFILL,
    )


def itl_stall(obs: Observed) -> Finding | None:
    """Step 3: a max ITL of several hundred ms is a scheduler stall (preemption or prefill insertion)."""
    worst_key = "max_itl_ms" if obs.figure("max_itl_ms") is not None else "p99_itl_ms"
    worst = obs.figure(worst_key)
    if worst is None or worst < cb.ITL_STALL_MS:
        return None
    evidence: dict[str, float | int | str | None] = {worst_key: worst, "median_itl_ms": obs.figure("median_itl_ms")}
    preempted = obs.log.preemption_warnings > 0 or (obs.metric("num_retracted_requests_total") or 0) > 0
    # Preemption seen in the logs or counters points at memory settings; otherwise a long prefill was
    # inserted between decode steps, which chunked prefill splits (casebook case 1, round 1).
    technique, alternatives = (
        (cb.BATCH_PARAMETERS, [cb.CHUNKED_PREFILL]) if preempted else (cb.CHUNKED_PREFILL, [cb.BATCH_PARAMETERS])
    )
    cause = "preemption" if preempted else "a long prefill inserted between decode steps"
    return Finding(
        id="itl_stall", step=3, severity="warning", kind="cause",
        title=f"{'Max' if worst_key == 'max_itl_ms' else 'P99'} ITL {worst:,.2f} ms: decoding stalled at one step, "
              f"most likely by {cause}.",
        evidence=evidence, rule=cb.ITL_STALL.text, source=cb.ITL_STALL.source,
        technique=technique, alternatives=alternatives,
    )


def throughput_baseline(obs: Observed) -> Finding | None:
    """Step 4: output throughput is the baseline every later round is compared with."""
    output = obs.figure("output_throughput")
    if output is None:
        return None
    evidence: Evidence = {"output_throughput": output, "request_throughput": obs.figure("request_throughput")}
    return Finding(
        id="output_throughput_baseline", step=4, severity="info", kind="reading",
        title=f"Output throughput {output:,.2f} tok/s is the baseline for the tuning rounds.",
        evidence=evidence, rule=cb.THROUGHPUT_BASELINE.text, source=cb.THROUGHPUT_BASELINE.source,
    )


BENCH_RULES = (concurrency_vs_limit, ttft_tail_ratio, itl_stall, throughput_baseline)
