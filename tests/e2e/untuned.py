"""Scenarios nobody tuned for, and a memoised job runner, for tests/e2e/test_untuned_scenarios.py.

Each scenario is built as the data a user would send (`scenario_from_data`): a shipped model, a GPU of the
hardware catalogue, one starting deployment and a workload profile, with a small bench (a few hundred
prompts) so every job of the suite runs in seconds on the simulated runner.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from service import Playbook, Scenario
from service.engine import TuningOutcome, run_playbook
from service.engine.report import ReportRound
from service.plugin_host import PluginHost
from service.scenario import scenario_from_data

HOST = PluginHost()

EAGLE3 = {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 5, "speculative-eagle-topk": 8,
          "speculative-num-draft-tokens": 6}
FP8 = {"quantization": "fp8", "kv-cache-dtype": "fp8_e5m2"}


def scenario_data(name: str, *, model: str, gpu: str, gpus: int, tp: int, replicas: int = 1,
                  router: str | None = None, server: dict[str, Any] | None = None,
                  workload: dict[str, Any], slo: dict[str, Any] | None = None, objective: str = "latency",
                  bench: dict[str, Any] | None = None, nodes: int = 1) -> dict[str, Any]:
    """A scenario as JSON-ready data: one worker group of `replicas` TP `tp` servers on `gpus` per node."""
    flags = {"tp-size": tp, "enable-metrics": True, **(server or {})}
    if flags.get("speculative-algorithm") and "speculative-draft-model-path" not in flags:
        flags["speculative-draft-model-path"] = f"{model}-eagle3"
    deployment: dict[str, Any] = {"groups": [{"name": "worker", "replicas": replicas,
                                              "base_port": 30001 if router else 30000, "server": flags}]}
    if router:
        deployment["router"] = {"policy": router, "port": 30000}
    concurrency = workload.get("peak_concurrency", 16)
    return {
        "name": name, "model": model, "sglang_version": "0.5.23",
        "hardware": {"gpu": gpu, "gpus_per_node": gpus, "nodes": nodes},
        "deployment": deployment, "workload": workload, "slo": slo or {}, "objective": {"kind": objective},
        "bench": {"dataset": "workload", "num_prompts": 300, "max_concurrency": concurrency,
                  "warmup_requests": 4, **(bench or {})},
    }


# The untuned-scenario tests run whole jobs on the simulated runner with the casebook policy.
NEEDS_SIMULATED_CASEBOOK = [
    pytest.mark.slow,
    pytest.mark.skipif("simulated" not in HOST.components("runner") or "casebook" not in HOST.components("policy"),
                       reason="needs the simulated runner and the casebook policy"),
]

def build(data: dict[str, Any], **changes: Any) -> Scenario:
    """The scenario of `data`, with top-level `changes` (a deep copy, so variants never share state)."""
    return scenario_from_data({**copy.deepcopy(data), **changes}, source=data["name"])


_done: dict[tuple[str, str], TuningOutcome] = {}


def job(key: str, playbook: Playbook, scenario: Scenario, *, seed: int = 0) -> TuningOutcome:
    """One job on the simulated runner with the casebook policy, run once per process for its key."""
    memo = (key, f"{playbook.name}:{seed}")
    if memo not in _done:
        _done[memo] = asyncio.run(run_playbook(HOST, playbook, scenario, runner="simulated", seed=seed))
    return _done[memo]


def playbook(name: str, *techniques: str, max_rounds: int = 6, repeats: int = 2, **fields: Any) -> Playbook:
    """A short custom playbook: the listed techniques in order, two repeats per round."""
    return Playbook(name=name, techniques=list(techniques), max_rounds=max_rounds, repeats=repeats, **fields)


def auto(**fields: Any) -> Playbook:
    """The built-in `auto` playbook (every technique in the casebook's order), two repeats per round."""
    base = HOST.components("playbook")["auto"]
    return Playbook(**{**{f: getattr(base, f) for f in base.__struct_fields__}, "repeats": 2, **fields})


def to_toml(data: dict[str, Any], table: str = "") -> str:
    """`data` as a scenario file (`tune --scenario` reads TOML): scalars, tables and arrays of tables."""
    lines, tables = [], []
    for key, value in data.items():
        name = f'{table}."{key}"' if table else f'"{key}"'
        if isinstance(value, dict):
            tables.append(f"\n[{name}]\n" + to_toml(value, name))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            tables.extend(f"\n[[{name}]]\n" + to_toml(item, name) for item in value)
        else:
            lines.append(f'"{key}" = {_scalar(value)}')
    return "\n".join(lines) + "".join(tables) + "\n"


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return repr(value)


# -- workloads --------------------------------------------------------------------------------------------

# An internal chat assistant: short prompts under a shared 800-token system prompt, 500-token answers.
CHAT = {"name": "chat", "input": {"median": 1000, "p95": 3000}, "output": {"median": 500, "p95": 1200},
        "prefix_sharing_rate": 0.3, "peak_concurrency": 8, "prefix": {"system_prompt_tokens": 800},
        "speculative": {"draft_acceptance": 0.78}}
# Short summaries driven by a batch client at 240 concurrent requests (casebook case 3's shape, 9B already).
SUMMARIES = {"name": "summaries", "input": {"median": 1200, "p95": 2000},
             "output": {"median": 150, "p95": 190, "maximum": 200}, "peak_concurrency": 240,
             "prefix": {"system_prompt_tokens": 150}, "speculative": {"draft_acceptance": 0.55}}
# Agents whose users register their own tools: a new JSON schema per request, 200 of them in a run.
USER_TOOLS = {"name": "user-tools", "input": {"median": 1500, "p95": 2200}, "output": {"median": 150, "p95": 250},
              "peak_concurrency": 24, "request_rate": 15.0,
              "structured_output": {"mode": "json_schema", "schemas": 200, "dynamic_schemas": True},
              "prefix": {"system_prompt_tokens": 400, "tool_definition_tokens": 800, "tools_position": "first"}}
# Support chat: a 1,000-token system prompt, then each of 64 conversations' 3,500-token history.
SUPPORT = {"name": "support-chat", "input": {"median": 5000, "p95": 9000}, "output": {"median": 300, "p95": 800},
           "prefix_sharing_rate": 0.7, "peak_concurrency": 32,
           "prefix": {"system_prompt_tokens": 1000, "history_tokens": 3500, "conversations": 64},
           "speculative": {"draft_acceptance": 0.7}}
# Policy Q&A over 1,000 documents of 12,000 tokens (90% of traffic on 140 of them), a time stamp and request
# id in front of the system prompt: casebook case 2's shape on a corpus whose popular set outgrows one replica.
POLICY_QA = {"name": "policy-qa", "input": {"median": 12300, "p95": 13500}, "output": {"median": 200, "p95": 400},
             "prefix_sharing_rate": 0.85, "peak_concurrency": 16, "request_rate": 6.0,
             "prefix": {"system_prompt_tokens": 300, "variable_tokens": 30, "variable_position": "front",
                        "documents": {"count": 1000, "tokens": 12000, "popular": 140, "popular_share": 0.9}}}
# Casebook case 1's coding traffic (3,000-token shared conventions, long pastes) at 90 concurrent streams.
CODING_90 = {"name": "coding", "input": {"median": 2100, "p95": 6000}, "output": {"median": 400, "p95": 1200},
             "prefix_sharing_rate": 0.35, "peak_concurrency": 90, "prefix": {"system_prompt_tokens": 3000},
             "speculative": {"draft_acceptance": 0.78}}
# A chat service at 64 concurrent streams under a shared 400-token system prompt, served for throughput.
CHAT_64 = {"name": "chat-64", "input": {"median": 800, "p95": 2400}, "output": {"median": 200, "p95": 500},
           "peak_concurrency": 64, "prefix": {"system_prompt_tokens": 400}}
# A nightly classification run: 20 million tickets, 3e9 output tokens, in an 8-hour window.
TICKETS = {"name": "nightly-tickets", "input": {"median": 1200, "p95": 2000},
           "output": {"median": 150, "p95": 190, "maximum": 200}, "peak_concurrency": 128,
           "total_requests": 20000000, "prefix": {"system_prompt_tokens": 150}}

# A blind evaluation of 50 cases, BF16 against FP8, with no significant difference (casebook case 1 round 2).
FP8_CHECKED = [{"subject": "Qwen/Qwen3.6-9B:fp8", "metrics": {"equivalent": 48, "bf16_better": 1, "fp8_better": 1},
                "acceptable": True, "note": "blind evaluation of 50 chat cases"}]

# -- scenarios ----------------------------------------------------------------------------------------------

LATENCY_SLO = {"ttft_p95_ms": 2000, "itl_median_ms": 60}
A100_CHAT = scenario_data("chat-9b-a100-tp4", model="Qwen/Qwen3.6-9B", gpu="A100-80GB", gpus=4, tp=4,
                          workload=CHAT, slo=LATENCY_SLO)
NEAR_THRESHOLD = scenario_data("summaries-9b-h100-eagle3", model="Qwen/Qwen3.6-9B", gpu="H100-SXM", gpus=2, tp=2,
                               server={**FP8, **EAGLE3}, workload=SUMMARIES, objective="throughput",
                               bench={"num_prompts": 600})
OUTLINES = scenario_data("user-tools-outlines", model="Qwen/Qwen3.6-35B-A3B", gpu="H100-SXM", gpus=2, tp=2,
                         server={**FP8, "grammar-backend": "outlines"}, workload=USER_TOOLS,
                         slo={"ttft_p95_ms": 1000, "failure_rate_max": 0.0}, objective="failure_rate")
ROUND_ROBIN = scenario_data("support-27b-round-robin", model="Qwen/Qwen3.6-27B", gpu="H200-SXM", gpus=8, tp=2,
                            replicas=4, router="round_robin", server=FP8, workload=SUPPORT,
                            slo={"ttft_p95_ms": 2000})
RAG_FRONT = scenario_data("policy-qa-front-fields", model="Qwen/Qwen3.6-27B", gpu="H100-SXM", gpus=4, tp=2,
                          replicas=2, router="round_robin", server=FP8, workload=POLICY_QA,
                          slo={"ttft_p95_ms": 1500}, bench={"num_prompts": 400, "warm_prompts": 1200})
BF16_27B = scenario_data("chat-27b-h100-bf16", model="Qwen/Qwen3.6-27B", gpu="H100-SXM", gpus=2, tp=2,
                         workload={**CHAT, "peak_concurrency": 16}, slo={"ttft_p95_ms": 2000})
UNMEETABLE = scenario_data("chat-9b-l40s-50k", model="Qwen/Qwen3.6-9B", gpu="L40S", gpus=2, tp=2,
                           workload={**CHAT, "peak_concurrency": 16}, slo={"min_output_throughput": 50000},
                           objective="throughput")
NO_FIT = scenario_data("chat-27b-one-l40s", model="Qwen/Qwen3.6-27B", gpu="L40S", gpus=1, tp=1,
                       workload={**CHAT, "peak_concurrency": 16}, slo={"ttft_p95_ms": 2000})
# Weights that fit, but mem-fraction-static 0.97 leaves 1.4 GiB of each 48 GB L40S outside the static pool,
# where a 32,768-token forward pass needs 4.4 GiB: CUDA runs out of memory at every start.
NO_START = scenario_data("chat-27b-l40s-no-headroom", model="Qwen/Qwen3.6-27B", gpu="L40S", gpus=2, tp=2,
                         server={"mem-fraction-static": 0.97, "chunked-prefill-size": 32768},
                         workload={**CHAT, "peak_concurrency": 16}, slo={"ttft_p95_ms": 2000})
# Four L40S (PCIe, no NVLink) as one TP4 instance, for throughput within a roomy latency SLO.
L40S_TP4 = scenario_data("chat-9b-l40s-tp4", model="Qwen/Qwen3.6-9B", gpu="L40S", gpus=4, tp=4, workload=CHAT_64,
                         slo={"ttft_p95_ms": 2000, "itl_median_ms": 40}, objective="throughput")
NIGHTLY_MISS = scenario_data("tickets-9b-h100-8h", model="Qwen/Qwen3.6-9B", gpu="H100-SXM", gpus=2, tp=2,
                             server=FP8, workload=TICKETS, objective="deadline",
                             slo={"deadline_hours": 8, "deadline_output_tokens": 3.0e9},
                             bench={"num_prompts": 600, "ignore_eos": False, "max_new_tokens": 200})


# Casebook case 1's coding traffic at 16 streams on one BF16 TP4 H200 instance, a throughput objective and a
# TTFT p95 target of 131 ms, which the starting deployment sits on at seed 0 (129 ms over two seeds, 153 ms
# pooled over four).
TIGHT_TTFT = scenario_data("coding-27b-h200-tight-ttft", model="Qwen/Qwen3.6-27B", gpu="H200-SXM", gpus=4, tp=4,
                           workload={**CODING_90, "peak_concurrency": 16}, slo={"ttft_p95_ms": 131},
                           objective="throughput")

# An MoE that needs the whole B200 node in BF16, with a blind evaluation that clears FP8: once FP8 is kept,
# parallelism (skipped on the BF16 weights) would apply to the FP8 ones.
GLM_AIR_B200 = {**scenario_data("chat-glm-air-b200-bf16", model="zai-org/GLM-4.5-Air", gpu="B200", gpus=8, tp=8,
                                workload=CHAT, slo={"ttft_p95_ms": 3000, "itl_median_ms": 60}),
                "quality": [{"subject": "zai-org/GLM-4.5-Air:fp8", "acceptable": True,
                             "metrics": {"equivalent": 48, "bf16_better": 1, "fp8_better": 1},
                             "note": "blind evaluation of 50 chat cases"}]}

# The same MoE in BF16 as one TP8 instance on a 80 GB H100 node, for chat at 16 streams under the cost objective.
GLM_AIR_H100_COST = scenario_data("chat-glm-air-h100-cost", model="zai-org/GLM-4.5-Air", gpu="H100-SXM", gpus=8,
                                  tp=8, workload=CHAT, slo={"ttft_p95_ms": 3000, "itl_median_ms": 60},
                                  objective="cost")

# A 9B model on two H100s whose scheduler was starved (8 running requests for 64 streams, 512-token chunks),
# for throughput within a roomy latency SLO.
STARVED_9B = scenario_data("chat-9b-h100-starved", model="Qwen/Qwen3.6-9B", gpu="H100-SXM", gpus=2, tp=2,
                           server={"max-running-requests": 8, "chunked-prefill-size": 512}, workload=CHAT_64,
                           slo={"ttft_p95_ms": 1500, "itl_median_ms": 40}, objective="throughput",
                           bench={"num_prompts": 600})


def coding_90(gpu: str) -> dict[str, Any]:
    """Casebook case 1's workload at 90 streams on one FP8 TP2 instance of `gpu`."""
    return scenario_data(f"coding-90-{gpu}", model="Qwen/Qwen3.6-27B", gpu=gpu, gpus=2, tp=2, server=FP8,
                         workload=CODING_90, slo={"ttft_p95_ms": 3000, "itl_median_ms": 50},
                         bench={"num_prompts": 400})


def chat_9b(gpu: str, **server: Any) -> dict[str, Any]:
    """The chat workload on one TP2 instance of `gpu`, BF16 unless `server` says otherwise."""
    return scenario_data(f"chat-9b-{gpu}", model="Qwen/Qwen3.6-9B", gpu=gpu, gpus=2, tp=2, server=server,
                         workload=CHAT, slo={"ttft_p95_ms": 2000})
# Mixed chat and coding on one 8 x H200 node with an MoE: casebook case 5's model kind at single-node scale.
MIXED = {"name": "mixed-chat", "input": {"median": 3000, "p95": 8000}, "output": {"median": 800, "p95": 2000},
         "prefix_sharing_rate": 0.25, "peak_concurrency": 64, "prefix": {"system_prompt_tokens": 1000}}
MOE_ONE_NODE = scenario_data("moe-35b-one-h200-node", model="Qwen/Qwen3.6-35B-A3B", gpu="H200-SXM", gpus=8, tp=8,
                             server=FP8, workload=MIXED, slo={"ttft_p95_ms": 3000, "itl_median_ms": 60},
                             objective="cost")

# Casebook case 1's final deployment (27B FP8 + EAGLE3, TP2 x 4 on 8 H200) at 512 streams with a 1 s TTFT p95
# target: SGLang's speculative reset of the running cap to 48 queues most of them. Raising the cap halves the
# p95 TTFT but stays inconclusive on the main line; the branch from it ends far closer to the target.
CASE1_AT_512 = scenario_data("coding-27b-h200-512", model="Qwen/Qwen3.6-27B", gpu="H200-SXM", gpus=8, tp=2,
                             replicas=4, router="cache_aware", server={**FP8, **EAGLE3},
                             workload={**CODING_90, "peak_concurrency": 512},
                             slo={"ttft_p95_ms": 1000, "itl_median_ms": 50}, objective="throughput",
                             bench={"num_prompts": 1500})

# DeepSeek-V4-Flash in BF16 as one TP8 instance on a B200 node, for agentic coding at 128 streams: 9k-token
# prompts under a 6k-token shared system prompt. Its p95 TTFT misses 5 s before and after NEXTN.
AGENT_CODING = {"name": "agent-coding", "input": {"median": 9000, "p95": 20000}, "output": {"median": 600, "p95": 2000},
                "prefix_sharing_rate": 0.8, "peak_concurrency": 128, "prefix": {"system_prompt_tokens": 6000},
                "speculative": {"draft_acceptance": 0.7}}
DSV4_AGENTS = scenario_data("agents-dsv4-b200", model="deepseek-ai/DeepSeek-V4-Flash", gpu="B200", gpus=8, tp=8,
                            workload=AGENT_CODING, slo={"ttft_p95_ms": 5000, "itl_median_ms": 60},
                            objective="throughput")

# A 9B model disaggregated on four H100s (two TP1 prefill, two TP1 decode workers) for chat at 64 streams:
# PD well below the casebook's 16-GPU scale.
PD_FOUR_GPUS = {**scenario_data("chat-9b-pd-four-h100", model="Qwen/Qwen3.6-9B", gpu="H100-SXM", gpus=4, tp=1,
                                router="round_robin", workload=CHAT_64, slo={"ttft_p95_ms": 1500, "itl_median_ms": 40},
                                objective="throughput"),
                "deployment": {"router": {"policy": "round_robin", "port": 30000}, "groups": [
                    {"name": "prefill", "role": "prefill", "replicas": 2, "base_port": 30001, "bootstrap_port": 8998,
                     "server": {"tp-size": 1, "enable-metrics": True}},
                    {"name": "decode", "role": "decode", "replicas": 2, "base_port": 30011,
                     "server": {"tp-size": 1, "enable-metrics": True}}]}}

# The 35B-A3B MoE as one TP2 instance on two H100s with EP2 and EPLB, chat at 64 streams for throughput.
EP_TWO_GPUS = scenario_data("chat-35b-ep2-two-h100", model="Qwen/Qwen3.6-35B-A3B", gpu="H100-SXM", gpus=2, tp=2,
                            server={"ep-size": 2, "enable-eplb": True}, workload=CHAT_64,
                            slo={"ttft_p95_ms": 2000, "itl_median_ms": 40}, objective="throughput")

# Field extraction with five fixed JSON schemas sent as `json_schema`, no --grammar-backend set (SGLang's
# default, xgrammar), on four TP1 9B replicas behind round_robin.
SCHEMAS_DEFAULT_BACKEND = scenario_data(
    "extract-9b-default-grammar", model="Qwen/Qwen3.6-9B", gpu="H100-SXM", gpus=4, tp=1, replicas=4,
    router="round_robin", workload={"name": "extract", "input": {"median": 1800, "p95": 3000},
                                    "output": {"median": 250, "p95": 400}, "peak_concurrency": 96,
                                    "prefix": {"system_prompt_tokens": 600},
                                    "structured_output": {"mode": "json_schema", "schemas": 5}},
    slo={"ttft_p95_ms": 1500, "failure_rate_max": 0.0}, objective="throughput")

# Agents under one 20,000-token system prompt on four TP1 9B replicas behind round_robin, 64 streams: every
# prompt's shared prefix passes cache_aware's 0.3 cache threshold.
AGENTS_ROUND_ROBIN = scenario_data(
    "agents-9b-round-robin", model="Qwen/Qwen3.6-9B", gpu="H100-SXM", gpus=4, tp=1, replicas=4,
    router="round_robin", workload={"name": "agent", "input": {"median": 22000, "p95": 30000},
                                    "output": {"median": 300, "p95": 700}, "prefix_sharing_rate": 0.9,
                                    "peak_concurrency": 64, "prefix": {"system_prompt_tokens": 20000}},
    slo={"ttft_p95_ms": 2000, "itl_median_ms": 40}, objective="throughput")

# A dense 27B in BF16 as one TP8 x PP2 server over two 8-GPU H100 nodes, chat at 64 streams for throughput.
PIPELINE_TWO_NODES = scenario_data("chat-27b-tp8-pp2", model="Qwen/Qwen3.6-27B", gpu="H100-SXM", gpus=8, nodes=2,
                                   tp=8, server={"pp-size": 2}, workload=CHAT_64,
                                   slo={"ttft_p95_ms": 1500, "itl_median_ms": 40}, objective="throughput")

# Support chat with long conversations: 400 conversations of 16,000 history tokens under a 2,000-token system
# prompt, on two TP2 27B FP8 replicas behind cache_aware (H100), 48 streams, measured on a warm service.
LONG_CONVERSATIONS = scenario_data(
    "long-conversations-27b-h100", model="Qwen/Qwen3.6-27B", gpu="H100-SXM", gpus=4, tp=2, replicas=2,
    router="cache_aware", server=FP8,
    workload={"name": "long-conv", "input": {"median": 18000, "p95": 30000}, "output": {"median": 400, "p95": 900},
              "prefix_sharing_rate": 0.85, "peak_concurrency": 48,
              "prefix": {"system_prompt_tokens": 2000, "history_tokens": 16000, "conversations": 400}},
    slo={"ttft_p95_ms": 4000, "itl_median_ms": 50}, bench={"num_prompts": 600, "warm_prompts": 800})

# Bursty API traffic arriving at 40 requests/s on one 27B BF16 TP2 instance (two H100s), which serves about 6:
# the p95 TTFT target is missed by queueing, and the replicas that would meet it are several times eight.
OVERLOAD = scenario_data("burst-27b-two-h100", model="Qwen/Qwen3.6-27B", gpu="H100-SXM", gpus=2, tp=2,
                         workload={"name": "burst", "input": {"median": 2000, "p95": 5000},
                                   "output": {"median": 300, "p95": 800}, "peak_concurrency": 400,
                                   "request_rate": 40.0},
                         slo={"ttft_p95_ms": 2000, "itl_median_ms": 50}, bench={"num_prompts": 800})

# A 27B in BF16 as one TP4 instance on four A100s (no FP8 tensor cores), chat at 64 streams for throughput: its
# p95 TTFT sits at the 2 s target, so a round that misses it within noise starts a branch (docs/tuning.md).
A100_27B_TP4 = scenario_data("chat-27b-a100-tp4", model="Qwen/Qwen3.6-27B", gpu="A100-80GB", gpus=4, tp=4,
                             workload=CHAT_64, slo={"ttft_p95_ms": 2000, "itl_median_ms": 60}, objective="throughput")

# A 9B started with HiCache (ratio 2) on traffic that shares no prefix: nothing is ever restored from host
# memory, and removing it measures the same.
HICACHE_NO_SHARING = scenario_data("chat-9b-hicache-no-sharing", model="Qwen/Qwen3.6-9B", gpu="H100-SXM", gpus=1,
                                   tp=1, server={"enable-hierarchical-cache": True, "hicache-ratio": 2.0,
                                                 "page-size": 64},
                                   workload={**CHAT_64, "prefix_sharing_rate": 0.0, "prefix": {"system_prompt_tokens": 0}},
                                   slo={"ttft_p95_ms": 2000, "itl_median_ms": 40}, objective="throughput")


# -- reading a job's report ---------------------------------------------------------------------------------

KEPT = ("accept", "keep_tradeoff")


def rounds(outcome: TuningOutcome, technique: str) -> list[ReportRound]:
    return [r for r in outcome.report.rounds if r.technique == technique]


def final_server(outcome: TuningOutcome):  # type: ignore[no-untyped-def]
    assert outcome.report.final is not None, outcome.report.headline
    return outcome.report.final.deployment.groups[0].server


def skipped(outcome: TuningOutcome, technique: str) -> str:
    return next(s.reason for s in outcome.report.skipped if s.technique == technique)
