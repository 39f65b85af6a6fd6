"""`--bench sglang`: run SGLang's own serving benchmark and read its output file.

Its module is `sglang.benchmark.serving` from 0.5.15 (`sglang.bench_serving` stays as a shim that warns)
and `sglang.bench_serving` before (`bench_module`). From 0.5.23 it reports goodput (`--goodput`, per-request
bounds from the scenario's SLO, `goodput_slos`); from 0.5.14 `--cache-report` adds the cached prompt tokens
by tier (device, host, storage), which `read_cache_tiers` reads.

Used when the `sglang` package is importable. bench_serving cannot replay a workload's prefix structure, so
a `workload` bench becomes its `random` dataset with the workload's median lengths (a shared prefix shows up
only through `--dataset-name generated-shared-prefix`, which the prefix structure maps to when it has a
system prompt; one group of `--num-prompts` prompts, since that dataset ignores `--num-prompts`). The last
line of the JSONL output file is the round (bench_serving appends).

bench_serving has no flag for traffic served before the run (`bench.warm_prompts`): a first pass of that
many prompts, with a seed of its own and no warm-up, runs before the measured pass and its output is
discarded (`bench_serving_warm_argv`). bench_serving draws prompt text from `--seed`, so that pass brings the
server's cache and memory pool to steady state but does not hold the measured pass's own shared prefix.

A trace bench becomes bench_serving's `mooncake` dataset over the records written to a file
(`write_bench_traces`: the served records for the first pass, the measured ones for the second), replayed at
their timestamps times `--mooncake-slowdown-factor` (0 without timestamps: as fast as `--max-concurrency`
allows). bench_serving builds each prompt from its hash ids, 128 words per id
(`benchmark/datasets/mooncake.py`), not from `input_length`, so its prompts are shorter than the trace says;
the built-in load generator sends the trace's lengths.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import msgspec

from service.domain import SLO, BenchFigures, BenchSpec, Scenario, WorkloadProfile, goodput_slos
from service.sglang.flags import version_key
from service.traces import write_trace

NEW_MODULE_FROM = (0, 5, 15)  # sglang/benchmark/serving.py (0.5.14 has only sglang/bench_serving.py)
GOODPUT_FROM = (0, 5, 23)  # sglang/benchmark/goodput.py (absent from 0.5.22)
CACHE_REPORT_FROM = (0, 5, 14)

# The warm pass's seed: far from the seeds of a round's repeats (seed, seed + 1, ...), whose measured
# prompts it must not replay.
WARM_PROMPTS_SEED_OFFSET = 1_000_003


def sglang_available() -> bool:
    """Whether SGLang's serving benchmark can run here."""
    return importlib.util.find_spec("sglang") is not None


def bench_module(sglang_version: str | None) -> str:
    """The serving benchmark's module for a version: `sglang.benchmark.serving` from 0.5.15."""
    if sglang_version is None or version_key(sglang_version) >= NEW_MODULE_FROM:
        return "sglang.benchmark.serving"
    return "sglang.bench_serving"


def bench_serving_argv(python: str, base_url: str, bench: BenchSpec, workload: WorkloadProfile, output_file: Path,
                       *, model: str, trace_file: Path | None = None, sglang_version: str | None = None,
                       slo: SLO | None = None) -> list[str]:
    """The serving benchmark's command line for a bench (argv list), for `sglang_version` (None: the newest).

    A trace bench reads its records from `trace_file`. With an SLO that sets latency targets, versions that
    have it get `--goodput`; versions that have it get `--cache-report`.
    """
    version = version_key(sglang_version) if sglang_version else GOODPUT_FROM
    argv = [python, "-m", bench_module(sglang_version), "--backend", bench.backend, "--base-url", base_url,
            "--model", model, "--num-prompts", str(bench.num_prompts), "--warmup-requests",
            str(bench.warmup_requests), "--seed", str(bench.seed), "--output-file", str(output_file)]
    system = workload.prefix.system_prompt_tokens
    if bench.trace is not None:
        if trace_file is None:
            raise ValueError("a trace bench needs its records written to a file for bench_serving (write_bench_traces)")
        slowdown = bench.trace.slowdown if bench.trace.timestamps else 0.0
        argv += ["--dataset-name", "mooncake", "--dataset-path", str(trace_file),
                 "--mooncake-slowdown-factor", repr(slowdown)]
    elif bench.dataset == "workload" and system:
        # The workload has one system prompt: one group, as many prompts as asked (the dataset is sized by
        # groups x prompts per group and ignores --num-prompts, `benchmark/datasets/generated_shared_prefix.py`).
        argv += ["--dataset-name", "generated-shared-prefix", "--gsp-num-groups", "1",
                 "--gsp-prompts-per-group", str(bench.num_prompts), "--gsp-system-prompt-len", str(system),
                 "--gsp-question-len", str(max(workload.input.median - system, 1)),
                 "--gsp-output-len", str(workload.output.median)]
    else:
        argv += ["--dataset-name", "random",
                 "--random-input-len", str(bench.random_input_len or workload.input.median),
                 "--random-output-len", str(bench.random_output_len or workload.output.median),
                 "--random-range-ratio", str(bench.random_range_ratio)]
    if bench.max_concurrency:
        argv += ["--max-concurrency", str(bench.max_concurrency)]
    if bench.request_rate and bench.trace is None:  # a trace's replay ignores --request-rate
        argv += ["--request-rate", str(bench.request_rate)]
    if bench.flush_cache:
        argv.append("--flush-cache")
    if not bench.ignore_eos:
        argv.append("--disable-ignore-eos")
    bounds = goodput_slos(slo) if slo is not None else {}
    if bounds and version >= GOODPUT_FROM:
        argv += ["--goodput", *(f"{key}:{value:g}" for key, value in bounds.items())]
    if version >= CACHE_REPORT_FROM:
        argv.append("--cache-report")
    return argv


def bench_serving_warm_argv(python: str, base_url: str, bench: BenchSpec, workload: WorkloadProfile,
                            output_file: Path, *, model: str, trace_file: Path | None = None,
                            sglang_version: str | None = None) -> list[str] | None:
    """The pass that stands for `bench.warm_prompts` (None when there are none): that many prompts of the
    same dataset and concurrency, its own seed, no warm-up requests and no cache flush; its output is discarded.
    A trace bench's served records are read from `trace_file`.
    """
    if bench.warm_prompts <= 0:
        return None
    served = msgspec.structs.replace(bench, num_prompts=bench.warm_prompts, warmup_requests=0, flush_cache=False,
                                     seed=bench.seed + WARM_PROMPTS_SEED_OFFSET, request_rate=None)
    return bench_serving_argv(python, base_url, served, workload, output_file, model=model, trace_file=trace_file,
                              sglang_version=sglang_version)


def write_bench_traces(bench: BenchSpec, folder: Path) -> tuple[Path | None, Path | None]:
    """A trace bench's records as bench_serving reads them: the served ones and the measured ones, one file each.

    Returns (served file or None, measured file), or (None, None) for a bench without a trace.
    """
    if bench.trace is None:
        return None, None
    before, records = bench.trace.parts(bench.warm_prompts, bench.num_prompts)
    served = folder / "trace_served.jsonl" if before else None
    if served is not None:
        write_trace(served, before)
    measured = folder / "trace.jsonl"
    write_trace(measured, records)
    return served, measured


def read_bench_output(path: Path) -> BenchFigures:
    """The figures of the last line of a bench_serving `--output-file` (keys as BenchFigures names them).

    Raises:
        ValueError: The file holds no result line (bench_serving printed an error instead).
    """
    row = _last_row(path)
    fields = set(BenchFigures.__struct_fields__)
    figures = {key: value for key, value in row.items() if key in fields and value is not None}
    if "max_itl_ms" not in figures and "p99_itl_ms" in figures:
        figures["max_itl_ms"] = figures["p99_itl_ms"]  # the file has no max; the printed block does
    return msgspec.convert(figures, type=BenchFigures, strict=False)


def read_cache_tiers(path: Path) -> dict[str, float] | None:
    """Cached prompt tokens by tier over all prompt tokens, from the `cache_report` of `--cache-report`.

    None when the file has no report, or the server gave no per-tier breakdown (no `--enable-cache-report`).
    """
    try:
        report = _last_row(path).get("cache_report")
    except ValueError:
        return None
    if not isinstance(report, dict) or not report.get("total_prompt_tokens"):
        return None
    total = float(report["total_prompt_tokens"])
    tiers = {tier: float(report[f"{tier}_cached_tokens"]) / total for tier in ("device", "host", "storage")
             if report.get(f"{tier}_cached_tokens") is not None}
    return tiers or None


def _last_row(path: Path) -> dict[str, Any]:
    lines = [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if not lines:
        raise ValueError(f"bench_serving wrote no result to {path}")
    row: dict[str, Any] = json.loads(lines[-1])  # Python's json, as bench_serving writes it (`Infinity` included)
    return row


def scenario_bench_argv(scenario: Scenario, base_url: str, *, sglang_version: str | None = None,
                        python: str = "python") -> list[str]:
    """The serving-benchmark command that measures `scenario`'s bench against `base_url` (what `render` prints).

    Output goes to `bench_serving.jsonl`; a trace bench reads `trace.jsonl` (`sglang-tuner` writes it with
    the round's records when it runs the bench itself).
    """
    bench = scenario.bench
    model = scenario.deployment.groups[0].server.model_path if scenario.deployment.groups else None
    return bench_serving_argv(python, base_url, bench, scenario.workload, Path("bench_serving.jsonl"),
                              model=model or scenario.model,
                              trace_file=Path("trace.jsonl") if bench.trace is not None else None,
                              sglang_version=sglang_version or scenario.sglang_version, slo=scenario.slo)
