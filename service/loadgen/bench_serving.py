"""`--bench sglang`: run SGLang's own `python -m sglang.bench_serving` and read its output file.

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

from service.domain import BenchFigures, BenchSpec, WorkloadProfile
from service.traces import write_trace

# The warm pass's seed: far from the seeds of a round's repeats (seed, seed + 1, ...), whose measured
# prompts it must not replay.
WARM_PROMPTS_SEED_OFFSET = 1_000_003


def sglang_available() -> bool:
    """Whether `python -m sglang.bench_serving` can run here."""
    return importlib.util.find_spec("sglang") is not None


def bench_serving_argv(python: str, base_url: str, bench: BenchSpec, workload: WorkloadProfile, output_file: Path,
                       *, model: str, trace_file: Path | None = None) -> list[str]:
    """The bench_serving command line for a bench (argv list); a trace bench reads its records from `trace_file`."""
    argv = [python, "-m", "sglang.bench_serving", "--backend", bench.backend, "--base-url", base_url,
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
    return argv


def bench_serving_warm_argv(python: str, base_url: str, bench: BenchSpec, workload: WorkloadProfile,
                            output_file: Path, *, model: str, trace_file: Path | None = None) -> list[str] | None:
    """The pass that stands for `bench.warm_prompts` (None when there are none): that many prompts of the
    same dataset and concurrency, its own seed, no warm-up requests and no cache flush; its output is discarded.
    A trace bench's served records are read from `trace_file`.
    """
    if bench.warm_prompts <= 0:
        return None
    served = msgspec.structs.replace(bench, num_prompts=bench.warm_prompts, warmup_requests=0, flush_cache=False,
                                     seed=bench.seed + WARM_PROMPTS_SEED_OFFSET, request_rate=None)
    return bench_serving_argv(python, base_url, served, workload, output_file, model=model, trace_file=trace_file)


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
    lines = [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if not lines:
        raise ValueError(f"bench_serving wrote no result to {path}")
    row: dict[str, Any] = json.loads(lines[-1])  # Python's json, as bench_serving writes it (`Infinity` included)
    fields = set(BenchFigures.__struct_fields__)
    figures = {key: value for key, value in row.items() if key in fields and value is not None}
    if "max_itl_ms" not in figures and "p99_itl_ms" in figures:
        figures["max_itl_ms"] = figures["p99_itl_ms"]  # the file has no max; the printed block does
    return msgspec.convert(figures, type=BenchFigures, strict=False)
