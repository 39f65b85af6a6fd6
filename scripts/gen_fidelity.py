"""Regenerate docs/fidelity.md: the casebook's changes against the simulator's, round by round.

Run: `.venv/bin/python scripts/gen_fidelity.py [--out docs/fidelity.md]`. Every round runs through the
`simulated` runner with the default cost model chain (aiconfigurator-core, roofline fallbacks counted),
seed 11, at the prompt counts below (smaller than the casebook's where the direction is stable).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.components import RoundContext  # noqa: E402
from service.domain import RoundResult, Scenario  # noqa: E402
from service.plugin_host import PluginHost  # noqa: E402
from tests.e2e.casebook import (  # noqa: E402
    FP8,
    NO_SPEC,
    SMALL_PD,
    SPEC,
    case5,
    case5_ep,
    case5_pd,
    case5_round1,
    load,
    replicas,
    server,
    small_pd_pair,
    workload,
)

Metric = Callable[[RoundResult], float]
METRICS: dict[str, Metric] = {
    "output tok/s": lambda r: r.bench.output_throughput,
    "median TTFT": lambda r: r.bench.median_ttft_ms,
    "p99 TTFT": lambda r: r.bench.p99_ttft_ms,
    "median ITL": lambda r: r.bench.median_itl_ms,
    "max ITL": lambda r: r.bench.max_itl_ms,
    "cache_hit_rate": lambda r: r.server.cache_hit_rate,
    "failure rate": lambda r: r.failure_rate,
    "expert imbalance": lambda r: r.expert_imbalance or 0.0,
}


# The hand-written text of docs/fidelity.md; {{ROUNDS}}, {{PD_SMALL}} and {{DECODE}} are filled in by `main`.
TEMPLATE = (Path(__file__).resolve().parent / "fidelity_template.md").read_text()

@dataclass(frozen=True)
class Row:
    """One casebook comparison: a metric before and after a change, in the casebook and simulated."""

    case: str
    change: str
    metric: str
    casebook: tuple[float, float]
    before: Scenario
    after: Scenario


def rows() -> list[Row]:  # noqa: PLR0914 - one table, written out
    c1 = load("coding-assistant-round0", num_prompts=300, warmup_requests=5)
    c1_chunk = server(c1, chunked_prefill_size=4096)
    c1_fp8 = server(c1_chunk, mem_fraction_static=0.90, **FP8)
    c1_spec = server(c1_fp8, **SPEC)
    c1_rand = {c: load("coding-assistant-round0", num_prompts=max(150, 3 * c), warmup_requests=5, dataset="random",
                       random_input_len=2100, random_output_len=400, random_range_ratio=0.1, max_concurrency=c)
               for c in (8, 25, 64, 128)}
    c2 = load("document-qa-rag-round0", num_prompts=600, warmup_requests=1)
    c2_rr, c2_ca = replicas(c2, 2, 2, "round_robin"), replicas(c2, 2, 2)
    c2_back = workload(c2_ca, "prefix", variable_position="back")
    # The casebook's round 3: its 2,000-prompt trace on the warm service, TP2 x 2 + cache_aware, fields last.
    c2_r3 = workload(replicas(load("document-qa-rag-round0", num_prompts=2000, warmup_requests=1), 2, 2), "prefix",
                     variable_position="back")
    c2_hc = server(c2_r3, page_size=64, enable_hierarchical_cache=True, hicache_ratio=2.0,
                   hicache_write_policy="write_through")
    c3 = load("nightly-batch-round0", num_prompts=1000, warmup_requests=2)
    c3_9b = msgspec.structs.replace(c3, model="Qwen/Qwen3.6-9B")
    c3_plain = server(c3_9b, **NO_SPEC)
    c3_max = msgspec.structs.replace(server(c3_plain, chunked_prefill_size=32768, max_running_requests=512,
                                            max_prefill_tokens=65536, mem_fraction_static=0.94,
                                            schedule_conservativeness=0.3),
                                     bench=msgspec.structs.replace(c3_plain.bench, max_concurrency=512, num_prompts=2000))
    c4 = load("structured-output-round0", num_prompts=1000, warmup_requests=1)
    c4_xg = server(workload(c4, "structured_output", mode="json_schema"), grammar_backend="xgrammar")
    c4_warm = workload(c4_xg, "structured_output", cache_warmed=True)
    c4_first = workload(c4_warm, "prefix", tools_position="first")
    # The direction tests' case-5 scenarios, at the casebook's 20,000 prompts: its command (no all-to-all
    # backend), then the DeepEP all-to-all its text describes.
    c5, c5_gather, c5_ep = case5(), case5_round1(), case5_ep(False)
    c5_tbo, c5_eplb = case5_ep(False, **{"--enable-two-batch-overlap": True}), case5_ep(True)
    c1_rows = [
        Row("1", "chunked prefill 4096 (0.5.23 default is 8192 on H200)", "p99 TTFT", (4380.92, 1621.05), c1, c1_chunk),
        Row("1", "chunked prefill 4096", "max ITL", (982.51, 118.27), c1, c1_chunk),
        Row("1", "chunked prefill 4096", "output tok/s", (1554.21, 1498.63), c1, c1_chunk),
        Row("1", "chunk 4096 + --enable-mixed-chunk (not in the casebook)", "max ITL", (982.51, 118.27), c1,
            server(c1, chunked_prefill_size=4096, enable_mixed_chunk=True)),
        Row("1", "chunk 2048 vs 4096", "p99 TTFT", (1621.05, 1584.22), c1_chunk, server(c1, chunked_prefill_size=2048)),
        Row("1", "chunk 2048 vs 4096", "output tok/s", (1498.63, 1402.11), c1_chunk,
            server(c1, chunked_prefill_size=2048)),
        Row("1", "FP8 weights + KV", "output tok/s", (1498.63, 1971.44), c1_chunk, c1_fp8),
        Row("1", "FP8 weights + KV", "median TTFT", (648.11, 482.30), c1_chunk, c1_fp8),
        Row("1", "FP8 weights + KV", "median ITL", (27.92, 21.08), c1_chunk, c1_fp8),
        Row("1", "EAGLE3", "output tok/s", (1971.44, 3284.90), c1_fp8, c1_spec),
        Row("1", "EAGLE3", "median ITL", (21.08, 12.63), c1_fp8, c1_spec),
        *[Row("1", f"EAGLE3 at concurrency {c} (bench: random 2100/400)", "output tok/s", cb,
              server(c1_rand[c], chunked_prefill_size=4096, **FP8),
              server(c1_rand[c], chunked_prefill_size=4096, **FP8, **SPEC))
          for c, cb in ((8, (712, 1584)), (25, (1971, 3285)), (64, (3844, 4912)), (128, (5901, 5734)))],
        Row("1", "TP2 x 4 + cache_aware router", "output tok/s", (3284.90, 4418.72), c1_spec, replicas(c1_spec, 2, 4)),
        Row("1", "TP2 x 4 + cache_aware router", "median TTFT", (511.44, 362.18), c1_spec, replicas(c1_spec, 2, 4)),
        Row("1", "TP2 x 4 + cache_aware router", "p99 TTFT", (1247.02, 938.55), c1_spec, replicas(c1_spec, 2, 4)),
        Row("1", "TP2 x 4 + cache_aware router", "median ITL", (12.63, 17.94), c1_spec, replicas(c1_spec, 2, 4)),
    ]
    return c1_rows + [
        Row("2", "TP2 x 2, round_robin", "cache_hit_rate", (0.62, 0.44), c2, c2_rr),
        Row("2", "TP2 x 2, round_robin", "median TTFT", (1843.07, 2510.33), c2, c2_rr),
        Row("2", "TP2 x 2, cache_aware", "cache_hit_rate", (0.62, 0.79), c2, c2_ca),
        Row("2", "cache_aware vs round_robin", "median TTFT", (2510.33, 892.41), c2_rr, c2_ca),
        Row("2", "variable fields to the end", "cache_hit_rate", (0.79, 0.94), c2_ca, c2_back),
        Row("2", "variable fields to the end", "median TTFT", (892.41, 412.88), c2_ca, c2_back),
        Row("2", "HiCache ratio 2, page 64, write_through", "cache_hit_rate", (0.94, 0.97), c2_r3, c2_hc),
        Row("2", "HiCache ratio 2, page 64, write_through", "median TTFT", (412.88, 356.20), c2_r3, c2_hc),
        Row("2", "HiCache ratio 2, page 64, write_through", "p99 TTFT", (961.22, 594.71), c2_r3, c2_hc),
        Row("2", "write_back vs write_through", "cache_hit_rate", (0.97, 0.93), c2_hc,
            server(c2_hc, hicache_write_policy="write_back")),
        Row("2", "write_back vs write_through", "output tok/s", (3844.02, 3901.30), c2_hc,
            server(c2_hc, hicache_write_policy="write_back")),
        Row("3", "27B -> 9B", "output tok/s", (2148.33, 5912.77), c3, c3_9b),
        Row("3", "speculative decoding off at 256", "output tok/s", (5912.77, 7104.20), c3_9b, c3_plain),
        Row("3", "batch maximisation", "output tok/s", (7104.20, 9438.51), c3_plain, c3_max),
        Row("3", "batch maximisation", "median ITL", (35.98, 68.22), c3_plain, c3_max),
        Row("3", "client concurrency 1024 vs 512", "output tok/s", (9438.51, 9401.77), c3_max,
            msgspec.structs.replace(c3_max, bench=msgspec.structs.replace(c3_max.bench, max_concurrency=1024))),
        Row("4", "xgrammar", "failure rate", (0.0374, 0.0), c4, c4_xg),
        Row("4", "xgrammar", "p99 TTFT", (788.21, 1342.55), c4, c4_xg),
        Row("4", "xgrammar", "output tok/s", (4128.60, 4402.18), c4, c4_xg),
        Row("4", "grammar cache warming", "p99 TTFT", (1342.55, 612.33), c4_xg, c4_warm),
        Row("4", "tool definitions first", "cache_hit_rate", (0.18, 0.67), c4_warm, c4_first),
        Row("4", "tool definitions first", "median TTFT", (421.07, 198.44), c4_warm, c4_first),
        Row("5", "EP32 + DP attention x 4, the casebook's command (no all-to-all backend)", "output tok/s",
            (57024, 94752), c5, c5_gather),
        Row("5", "EP32 + DP attention x 4, the casebook's command (no all-to-all backend)", "median ITL",
            (88.41, 61.20), c5, c5_gather),
        Row("5", "EP32 + DP attention x 4, DeepEP", "output tok/s", (57024, 94752), c5, c5_ep),
        Row("5", "EP32 + DP attention x 4, DeepEP", "median ITL", (88.41, 61.20), c5, c5_ep),
        Row("5", "EP32 + DP attention x 4, DeepEP + two-batch overlap (not in the casebook)", "output tok/s",
            (57024, 94752), c5, c5_tbo),
        Row("5", "EPLB, 32 redundant experts", "expert imbalance", (7.2, 1.9), c5_ep, c5_eplb),
        Row("5", "EPLB, 32 redundant experts", "output tok/s", (94752, 111888), c5_ep, c5_eplb),
        Row("5", "PD 5 prefill / 11 decode", "output tok/s", (111888, 158560), c5_eplb, case5_pd(5)),
        Row("5", "PD 7/9 vs 5/11", "median TTFT", (1884, 1344), case5_pd(5), case5_pd(7)),
        Row("5", "PD 7/9 vs 5/11", "median ITL", (44.9, 56.1), case5_pd(5), case5_pd(7)),
    ]


def _change(before: float, after: float) -> tuple[str, str]:
    if before == after:
        return "=", "1.00"
    sign = "+" if after > before else "-"
    return sign, f"{after / before:.2f}" if before else "inf"


def render(results: list[tuple[Row, RoundResult, RoundResult]]) -> str:
    lines = ["| case | change | metric | casebook | sign | ratio | simulator | sign | ratio | agree |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row, before, after in results:
        metric = METRICS[row.metric]
        if before.status == "failed" or after.status == "failed":
            lines.append(f"| {row.case} | {row.change} | {row.metric} | {row.casebook[0]:g} -> {row.casebook[1]:g} "
                         f"| | | failed: {(after.error or before.error or '')[:80]} | | | no |")
            continue
        cb_sign, cb_ratio = _change(*row.casebook)
        b, a = metric(before), metric(after)
        sim_sign, sim_ratio = _change(b, a)
        flat = abs(a / b - 1) < 0.01 if b else a == b
        agree = "yes" if cb_sign == sim_sign or (flat and abs(row.casebook[1] / row.casebook[0] - 1) < 0.01) else "no"
        lines.append(f"| {row.case} | {row.change} | {row.metric} | {row.casebook[0]:g} -> {row.casebook[1]:g} | "
                     f"{cb_sign} | {cb_ratio} | {b:.4g} -> {a:.4g} | {sim_sign} | {sim_ratio} | {agree} |")
    return "\n".join(lines)


def decode_step_table(run: Callable[[Scenario], RoundResult]) -> str:
    """Steady-state decode step (median ITL of a decode-dominated round) against aiconfigurator's estimate."""
    from plugins.cost_models.aic_engines import compile_engine
    from service.domain import resolve_model

    lines = ["| round | concurrency | simulated median ITL (ms) | aiconfigurator decode_step_latency (ms) | ratio |",
             "|---|---|---|---|---|"]
    for c in (8, 25, 64):
        s = server(load("coding-assistant-round0", num_prompts=max(150, 3 * c), warmup_requests=5, dataset="random",
                        random_input_len=2100, random_output_len=400, random_range_ratio=0.1, max_concurrency=c),
                   chunked_prefill_size=4096, **FP8)
        result = run(s)
        engine = compile_engine(resolve_model(s.model), s.hardware, s.deployment.groups[0].server).engine
        mean_ctx = int(result.bench.total_input_tokens / max(result.bench.completed, 1)
                       + result.bench.total_output_tokens / max(result.bench.completed, 1) / 2)
        static = engine.decode_step_latency(c, mean_ctx, 0)
        sim = result.bench.median_itl_ms
        lines.append(f"| case 1, FP8 TP8 H200, random 2100/400 | {c} | {sim:.2f} | {static:.2f} "
                     f"(batch {c}, context {mean_ctx}) | {sim / static:.2f} |")
    return "\n".join(lines)


def pd_small_table(run: Callable[[Scenario], RoundResult]) -> str:
    """The direction tests' PD pairs at the casebook's four smaller scales, side by side."""
    lines = ["| case | unified | PD (prefill / decode) | output tok/s | median TTFT (ms) | median TPOT (ms) | "
             "throughput lower? |", "|---|---|---|---|---|---|---|"]
    for name in SMALL_PD:
        unified, split = small_pd_pair(name)
        group, (prefill, decode) = unified.deployment.groups[0], split.deployment.groups
        u, x = run(unified).bench, run(split).bench
        lines.append(f"| {name.removesuffix('-round0')} | TP{group.server.tp_size} x {group.replicas} | "
                     f"TP{prefill.server.tp_size}: {prefill.replicas} / {decode.replicas} | "
                     f"{u.output_throughput:.4g} -> {x.output_throughput:.4g} "
                     f"({x.output_throughput / u.output_throughput:.2f}) | {u.median_ttft_ms:.4g} -> "
                     f"{x.median_ttft_ms:.4g} | {u.median_tpot_ms:.3g} -> {x.median_tpot_ms:.3g} | "
                     f"{'yes' if x.output_throughput < u.output_throughput else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "fidelity.md")
    args = parser.parse_args()
    host = PluginHost()
    runner = host.get("runner", "simulated")
    context = RoundContext(cost_models=host.components("cost_model"))

    def run(s: Scenario) -> RoundResult:
        return asyncio.run(runner.run_round(s, seed=11, context=context))

    results = [(row, run(row.before), run(row.after)) for row in rows()]
    text = TEMPLATE.replace("{{ROUNDS}}", render(results)).replace("{{DECODE}}", decode_step_table(run))
    text = text.replace("{{PD_SMALL}}", pd_small_table(run))
    from fidelity_calibrated import END, START, runner_with, table

    args.out.write_text(text.replace("{{CALIBRATED}}", f"{START}\n{table(runner_with())}\n{END}"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
