"""Cache strategy beyond routing: HiCache host tier, and prompt structure advice."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.techniques._rules import main_server, recompute_ms, reused_prefix_tokens, sharing_rate, transfer_ms
from service import (
    Applicability,
    ConfigDelta,
    ServerStartError,
    Technique,
    TuningContext,
    host_budget_bytes,
    node_ranks,
    resolve_server,
)

# Casebook "Prefix Sharing Rate": above 0.6 the hit rate dominates, so write_through.
HIT_RATE_DOMINANT = 0.6
# A hit rate this far below the sharing rate means prompts defeat the cache (casebook "Server Metrics").
HIT_RATE_GAP = 0.1
# The casebook's host tier is twice the device pool (case 2: --hicache-ratio 2); a smaller host memory takes the
# largest quarter step that fits, and below one device pool the tier would hold less than the GPU evicts.
HICACHE_RATIO = 2.0
HICACHE_MIN_RATIO = 1.0
HICACHE_OFF = {"enable_hierarchical_cache": None, "hicache_ratio": None, "hicache_size": None,
               "hicache_write_policy": None, "hicache_io_backend": None}


def saved_tokens(ctx: TuningContext) -> int:
    """Tokens one cache hit saves: a shared document, a conversation's history with the fixed parts before it,
    else the system prompt and tool definitions."""
    prefix = ctx.scenario.workload.prefix
    if prefix.documents is None and prefix.conversations and prefix.history_tokens:
        return prefix.system_prompt_tokens + prefix.tool_definition_tokens + prefix.history_tokens
    return reused_prefix_tokens(ctx.scenario)


def hicache_break_even(ctx: TuningContext) -> tuple[float, float]:
    """(recompute ms, transfer ms) for the prefix a hit saves (casebook case 2: 227 ms vs 30 ms)."""
    tokens = saved_tokens(ctx)
    return recompute_ms(tokens, ctx.model, ctx.scenario), transfer_ms(tokens, ctx.model, ctx.scenario)


def history_outgrows_pool(ctx: TuningContext) -> str | None:
    """How far the conversations' histories outgrow the GPU KV pools, or None when they fit (or there are none).

    Each conversation's history is a prefix its next turn reuses, so the working set is every conversation's
    history, as case 2's is every popular document: 400 conversations of 16,000 tokens are 6.4 million tokens,
    where two TP2 H100 replicas of a 27B in FP8 hold about 2.4 million.
    """
    prefix = ctx.scenario.workload.prefix
    if prefix.documents is not None or not prefix.conversations or not prefix.history_tokens:
        return None
    history = prefix.conversations * prefix.history_tokens
    pool = 0
    for group in ctx.scenario.deployment.groups:
        if group.role == "prefill":
            continue
        try:
            pool += group.replicas * resolve_server(ctx.model, ctx.scenario.hardware, group.server).pool_tokens
        except ServerStartError:
            return None
    if pool <= 0 or history <= pool:
        return None
    return (f"{prefix.conversations} conversations of {prefix.history_tokens:,} history tokens ({history:,}) "
            f"outgrow the GPU KV pools ({pool:,} tokens)")


def host_ratio(ctx: TuningContext) -> tuple[float | None, str]:
    """The `--hicache-ratio` the node's host memory holds for every server on it (HICACHE_RATIO when it fits,
    else the largest quarter step that does; None below HICACHE_MIN_RATIO), and why, in words.

    SGLang refuses to start a server whose host pool asks for more than the free host memory (less a 10 GiB
    reserve): 8 TP1 replicas of a 9B on one H200 node hold about 110 GB of KV each, so ratio 2 wants 1.8 TB
    of host memory, more than a 1 TB node has.
    """
    server = main_server(ctx.scenario)
    hardware = ctx.scenario.hardware
    try:
        resolved = resolve_server(ctx.model, hardware, server)
    except ServerStartError:
        return HICACHE_RATIO, ""
    device = resolved.device_pool_bytes * node_ranks(resolved, hardware) / resolved.world_size  # on one node
    replicas = sum(g.replicas for g in ctx.scenario.deployment.groups if g.role != "prefill")
    on_node = min(float(replicas), hardware.gpus_per_node / max(resolved.world_size, 1))
    budget = host_budget_bytes(hardware, on_node)
    fits = budget / device if device > 0 else HICACHE_RATIO
    if fits >= HICACHE_RATIO:
        return HICACHE_RATIO, ""
    why = (f"hardware.host_dram_gb = {hardware.host_dram_gb:g} leaves {max(budget, 0) / 1e9:.0f} GB per server for "
           f"a device pool of {device / 1e9:.0f} GB")
    ratio = int(fits * 4) / 4
    return (ratio, why) if ratio >= HICACHE_MIN_RATIO else (None, why)


class HiCache(Technique):
    """`--enable-hierarchical-cache` with ratio 2, page 64, write_through and the kernel io backend."""

    name: ClassVar[str] = "hicache"
    rank: ClassVar[int] = 4
    description: ClassVar[str] = ("Keeps evicted KV in host memory and restores it by transfer instead of "
                                  "recompute; only when transfer beats recompute (casebook case 2 round 3).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        if main_server(ctx.scenario).enable_hierarchical_cache:
            harmful = _hicache_harmful(ctx)
            if harmful is not None:
                return Applicability(True, f"HiCache is on but {harmful}: remove it.")
            return Applicability(False, "HiCache is already enabled, and transfer beats recompute here.")
        if saved_tokens(ctx) == 0:
            return Applicability(False, "No shared prefix to keep, so a host cache tier has nothing to restore.")
        recompute, transfer = hicache_break_even(ctx)
        figures = f"recompute {recompute:.0f} ms vs transfer {transfer:.0f} ms"
        if transfer >= recompute:
            return Applicability(False, f"Below break-even ({figures}): restoring from host is slower than "
                                        "recomputing, so HiCache is detrimental (casebook case 2).")
        outgrown = history_outgrows_pool(ctx)
        if outgrown is None and ctx.scenario.workload.prefix.documents is None:
            return Applicability(False, f"Above break-even ({figures}) but the reused prefixes fit on the GPU, so "
                                        "nothing is evicted for HiCache to restore (casebook: unnecessary).")
        ratio, why = host_ratio(ctx)
        if ratio is None:
            return Applicability(False, f"Above break-even ({figures}), but the host memory cannot hold a tier as "
                                        f"large as the GPU pool ({why}): SGLang would refuse to start the host pool "
                                        "it needs.")
        if outgrown is not None:
            return Applicability(True, f"{outgrown}, and transfer beats recompute ({figures}, "
                                       f"{recompute / transfer:.1f}x): evicted histories come back from host memory "
                                       "instead of being prefilled again, as case 2's documents do.")
        return Applicability(True, f"Documents outgrow the GPU KV pool and transfer beats recompute ({figures}, "
                                   f"{recompute / transfer:.1f}x), as in casebook case 2.")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        if main_server(ctx.scenario).enable_hierarchical_cache:
            if _hicache_harmful(ctx) is None:
                return []
            return [ConfigDelta(technique=self.name, summary="remove HiCache", set_server=dict(HICACHE_OFF),
                                simplifies=True)]
        first = "write_through" if sharing_rate(ctx.scenario) >= HIT_RATE_DOMINANT else "write_back"
        policies = [first]
        if ctx.options.get("compare_write_policies"):
            policies.append("write_back" if first == "write_through" else "write_through")
        # Page 64 amortises PCIe transfers on long prefixes; short prompts waste too much per page (case 2).
        page = 64 if saved_tokens(ctx) >= 2048 else 16
        ratio, why = host_ratio(ctx)
        if ratio is None:
            return []
        fitted = f" ({why})" if why else ""
        return [ConfigDelta(
            technique=self.name, summary=f"HiCache ratio {ratio:g}, page {page}, {policy}{fitted}",
            set_server={"page_size": page, "enable_hierarchical_cache": True, "hicache_ratio": ratio,
                        "hicache_write_policy": policy, "hicache_io_backend": "kernel",
                        "enable_cache_report": True})
            for policy in policies]


def _hicache_harmful(ctx: TuningContext) -> str | None:
    """Why a HiCache tier that is on does harm here, or None (casebook case 2 break-even: restoring a
    prefix from host memory must beat recomputing it, 30 ms against 227 ms there)."""
    if saved_tokens(ctx) == 0:
        return "no prefix is shared, so the host tier has nothing to restore"
    recompute, transfer = hicache_break_even(ctx)
    if transfer >= recompute:
        return (f"below break-even (recompute {recompute:.0f} ms vs transfer {transfer:.0f} ms): restoring from "
                "host is slower than recomputing (casebook case 2)")
    return None


class PromptStructure(Technique):
    """Advice, not a flag: fixed parts first, variable fields last; the round replays the re-ordered prompts."""

    name: ClassVar[str] = "prompt_structure"
    rank: ClassVar[int] = 4
    description: ClassVar[str] = ("A variable field before a shared prefix invalidates everything after it; "
                                  "moving it to the end halved TTFT in casebook case 2 and case 4.")
    # Casebook lessons learned: review the prompt structure before serving optimisation; while a variable
    # field breaks the prefix, neither cache-aware routing nor HiCache can find anything to reuse.
    diagnoses_before: ClassVar[tuple[str, ...]] = ("router_policy", "hicache")

    def applicable(self, ctx: TuningContext) -> Applicability:
        problems = _problems(ctx)
        if not problems:
            return Applicability(False, "Fixed parts already come first and variable fields last.")
        hit = ctx.baseline.server.cache_hit_rate if ctx.baseline else None
        gap = ""
        if hit is not None and sharing_rate(ctx.scenario) - hit >= HIT_RATE_GAP:
            gap = f" (cache hit rate {hit:.2f} vs sharing rate {sharing_rate(ctx.scenario):.2f})"
        return Applicability(True, f"{'; '.join(problems)}{gap}: prefix caching only matches exact prefixes "
                                   "(casebook case 2 round 2, case 4 round 3).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        if not _problems(ctx):
            return []
        workload = ctx.scenario.workload
        prefix = msgspec.structs.replace(workload.prefix, variable_position="back", tools_position="first")
        return [ConfigDelta(technique=self.name, summary="prompt re-ordered: fixed parts first, variable last",
                            workload=msgspec.structs.replace(workload, prefix=prefix),
                            artifacts={"prompt-structure.md": _advice(ctx)})]


def _problems(ctx: TuningContext) -> list[str]:
    prefix = ctx.scenario.workload.prefix
    found = []
    if prefix.variable_tokens > 0 and prefix.variable_position == "front":
        found.append(f"{prefix.variable_tokens} variable tokens (time, request id, user) open every prompt")
    if prefix.tool_definition_tokens > 0 and prefix.tools_position == "after_history" and prefix.history_tokens:
        found.append(f"{prefix.tool_definition_tokens} tokens of tool definitions follow the varying history")
    return found


def _advice(ctx: TuningContext) -> str:
    lines = ["# Prompt structure", "",
             "Prefix caching only reuses an exact prefix: everything after the first varying token is "
             "recomputed. Assemble prompts as:", "",
             "1. system prompt and fixed instructions",
             "2. tool definitions (identical on every request)",
             "3. shared documents",
             "4. conversation history",
             "5. the question",
             "6. variable fields (current time, request id, user name)", ""]
    lines += [f"Found: {p}." for p in _problems(ctx)]
    return "\n".join(lines) + "\n"
