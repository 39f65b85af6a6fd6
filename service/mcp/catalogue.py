"""The twelve tools, each with a one-paragraph description of when to use it."""

from __future__ import annotations

from functools import partial

from service.mcp import job_tools, local_tools
from service.mcp.inputs import (
    CompareRoundsInput,
    DiagnoseBenchmarkInput,
    GetJobInput,
    JobInput,
    JobRoundInput,
    PlanCapacityInput,
    ProfileWorkloadInput,
    RecommendPlaybookInput,
    ScenarioInput,
    StartTuningJobInput,
)
from service.mcp.job_tools import ServiceJobs
from service.mcp.tools import ToolSpec


def tool_catalogue(jobs: ServiceJobs | None = None) -> list[ToolSpec]:
    """Every tool, in the order an agent meets them while tuning (profile, plan, diagnose, tune, read)."""
    jobs = jobs or ServiceJobs.from_env()
    return [
        ToolSpec("profile_workload", (
            "Measure a workload profile from a request log before tuning: input and output length median and p95, "
            "the prefix sharing rate (the casebook's sorted-adjacent definition), the radix-cache reuse rate, and "
            "peak concurrency and request rate when lines carry timestamps. Use it first when you have production "
            "logs; pass log_text (JSON lines with prompt and completion) or a log_path, and a local tokenizer."),
            ProfileWorkloadInput, local_tools.profile_workload),
        ToolSpec("plan_capacity", (
            "Run the casebook's capacity calculation for a model on a GPU set: KV bytes per token, weight memory, "
            "KV needed for the peak (context tokens x concurrency), the KV capacity left in tokens and documents "
            "(with a HiCache ratio), the threshold batch size, and the output rate a batch deadline requires. Use "
            "it when choosing a model, GPU count or TP size, before any benchmark."),
            PlanCapacityInput, local_tools.plan_capacity),
        ToolSpec("diagnose_benchmark", (
            "Diagnose a sglang.bench_serving result the way the casebook does: concurrency vs max concurrency, "
            "median vs P99 TTFT (3x or more = long prompts block short ones), max ITL stalls, then token_usage and "
            "queue from a /metrics scrape, cache hit rate vs the profile's sharing rate, retractions, speculative "
            "accept length and the SLO. Use it whenever a benchmark looks bad; it returns findings with evidence, "
            "the casebook rule and the technique to try next."),
            DiagnoseBenchmarkInput, local_tools.diagnose_benchmark),
        ToolSpec("recommend_playbook", (
            "Pick the tuning playbook (one per casebook case, or auto) whose dominant constraint matches the "
            "workload profile, SLO and hardware: failure rate, deadline, scale, prefix sharing, or latency. Use it "
            "before start_tuning_job when you do not know which playbook fits."),
            RecommendPlaybookInput, local_tools.recommend_playbook),
        ToolSpec("start_tuning_job", (
            "Start a durable tuning job on the running service: a playbook applied to a scenario on a runner "
            "(simulator by default). Each round proposes one technique, benchmarks it and keeps or rolls it back by "
            "the casebook's metric-change patterns. Needs a write-scoped key. Returns the job id and links; poll "
            "get_job until its state is terminal, then read list_rounds or the report link."),
            StartTuningJobInput, partial(job_tools.start_tuning_job, jobs), writes=True),
        ToolSpec("get_job", (
            "Read a tuning job's state (queued with its queue position, running, succeeded, failed, cancelled), "
            "links to its rounds, events and report, and once it has finished its final launch commands. Use it to "
            "poll a job started with start_tuning_job; pass wait_seconds (up to 60) to wait for the next state "
            "change instead of polling in a loop."),
            GetJobInput, partial(job_tools.get_job, jobs)),
        ToolSpec("list_rounds", (
            "List a job's benchmark rounds, one line each: technique tried, state, and the policy's verdict. Use "
            "it to follow progress or to find the round to explain or compare."),
            JobInput, partial(job_tools.list_rounds, jobs)),
        ToolSpec("explain_decision", (
            "Explain why the policy accepted, rolled back or kept a round as a trade-off: the verdict, the "
            "matched metric-change pattern, the reasons and the figures that decided. Use it when a person asks "
            "why a change was kept or dropped."),
            JobRoundInput, partial(job_tools.explain_decision, jobs)),
        ToolSpec("cancel_job", (
            "Cancel a queued or running tuning job; the running round stops and the last accepted deployment is "
            "restored. Needs a write-scoped key. Use it when a job is no longer wanted or runs against the wrong "
            "target."),
            JobInput, partial(job_tools.cancel_job, jobs), writes=True),
        ToolSpec("render_launch_commands", (
            "Render a scenario's deployment into exact launch commands for an SGLang version: one "
            "`python -m sglang.launch_server` argv per worker with CUDA_VISIBLE_DEVICES and port, and the "
            "`sglang_router.launch_router` argv when there is a router. Use it to hand a final configuration to "
            "people or scripts; it refuses deployments that do not validate."),
            ScenarioInput, local_tools.render_launch_commands),
        ToolSpec("validate_config", (
            "Validate a scenario's deployment against an SGLang version's flag catalogue and its hardware: "
            "unknown or removed flags (with their replacement), wrong types or choices, and topology errors such as "
            "TP x DP over the GPUs or HiCache with page size 1. Use it before rendering or starting a job."),
            ScenarioInput, local_tools.validate_config),
        ToolSpec("compare_rounds", (
            "Compare two rounds of a job side by side: output and request throughput, median and P99 TTFT and "
            "ITL, with the relative change. Use it to read a trade-off the casebook's way (throughput down, tail "
            "latency down a lot) or to check a round against the baseline."),
            CompareRoundsInput, partial(job_tools.compare_rounds, jobs)),
    ]
