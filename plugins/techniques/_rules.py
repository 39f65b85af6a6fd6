"""The casebook's rules of thumb that several techniques share (pure functions over the service facade)."""

from __future__ import annotations

import math

import msgspec

from service import (
    SLO,
    SPECULATIVE_ALGORITHMS,
    SPECULATIVE_MAX_RUNNING,
    ConfigDelta,
    Deployment,
    ModelSpec,
    RouterConfig,
    Scenario,
    ServerConfig,
    ServerStartError,
    TuningContext,
    WorkerGroup,
    default_chunked_prefill,
    dtype_bytes,
    resolve_server,
    scenario_sharing,
    server_starts,
)

# Casebook case 2, HiCache break-even: "H100 FP8 1,979 TFLOPS x 4 GPUs x 60% effective".
EFFECTIVE_COMPUTE = 0.60
# Casebook case 1: speculative decoding reverses at concurrency 128 of a 206 threshold batch (0.62).
SPECULATIVE_BREAK_EVEN = 0.6
GIB = 1024**3
# `arg_groups/speculative_hook.py` _handle_eagle_family: "Max running requests is reset to 48 for speculative
# decoding" when --max-running-requests is unset, for every EAGLE-family algorithm (as the simulator has it).
SPECULATIVE_RESET = SPECULATIVE_MAX_RUNNING


def threshold_batch_size(scenario: Scenario) -> int:
    """Peak dense BF16 FLOP/s over HBM bandwidth, rounded down: 206 on H200, 295 on H100.

    The same formula as `sglang-tuner calc threshold-batch` (service/calc/throughput.py; casebook case 1
    "H200 threshold batch size (206)", case 3 "H100 threshold batch size of 295").
    """
    spec = scenario.hardware.spec
    return math.floor(spec.bf16_tflops / spec.hbm_bandwidth_tbps)


def unified_replicas(deployment: Deployment) -> int:
    return sum(g.replicas for g in deployment.groups if g.role in ("unified", "decode")) or 1


def concurrency_per_instance(scenario: Scenario) -> float:
    """Concurrent requests each serving instance holds: client concurrency spread over the replicas."""
    total = scenario.bench.max_concurrency or scenario.workload.peak_concurrency or 1
    return total / unified_replicas(scenario.deployment)


def measured_concurrency_per_instance(ctx: TuningContext) -> tuple[float, str]:
    """Concurrent requests each instance held in the last accepted round, and where the figure came from.

    The measured figure (bench_serving's mean concurrency over the replicas) is what the casebook compares
    with the threshold batch (case 3: "248.91" served of 256 clients); a scenario not yet measured falls
    back to the client concurrency it asks for.
    """
    measured = ctx.baseline.bench.concurrency if ctx.baseline is not None else 0.0
    if measured > 0:
        return measured / unified_replicas(ctx.scenario.deployment), "measured"
    return concurrency_per_instance(ctx.scenario), "configured"


def tried_deltas(ctx: TuningContext, technique: str) -> list[ConfigDelta]:
    """The candidates of `technique` already run in this job, read back from the context's `tried` keys.

    A key is the technique's name, a colon and the candidate as JSON (the engine's `delta_key`); a key in
    another form is not a candidate of this technique and is skipped.
    """
    found = []
    for key in ctx.tried:
        name, _, body = key.partition(":")
        if name != technique or not body:
            continue
        try:
            found.append(msgspec.json.decode(body, type=ConfigDelta))
        except msgspec.DecodeError:
            continue
    return found


def server_has(server: ServerConfig, changes: dict[str, object]) -> bool:
    """Whether every setting in `changes` already holds on `server` (a kept candidate is in effect)."""
    return all(getattr(server, key.replace("-", "_"), None) == value for key, value in changes.items()
               if not key.startswith("--"))


def has_latency_slo(slo: SLO) -> bool:
    """Casebook case 3: without a latency SLO, every latency optimisation is unnecessary or harmful."""
    return any(v is not None for v in (slo.ttft_p95_ms, slo.ttft_p99_ms, slo.ttft_median_ms, slo.itl_median_ms,
                                       slo.itl_p99_ms, slo.e2e_p95_ms))


def sharing_rate(scenario: Scenario) -> float:
    """The workload's prefix sharing rate: the stated one, else what a replayed trace or the prefix structure
    shares (a RAG corpus, a long system prompt or a trace needs no separate figure)."""
    return scenario_sharing(scenario)


def main_server(scenario: Scenario) -> ServerConfig:
    """The server config of the first group that decodes (unified, else decode)."""
    groups = scenario.deployment.groups
    return next((g.server for g in groups if g.role in ("unified", "decode")), groups[0].server)


def running_cap(server: ServerConfig) -> tuple[int | None, str]:
    """The running-request cap SGLang applies to `server` and where it comes from; None when the KV pool sizes
    the batch (no --max-running-requests, no speculation)."""
    if server.max_running_requests is not None:
        return server.max_running_requests, f"--max-running-requests {server.max_running_requests}"
    algorithm = (server.speculative_algorithm or "").upper()
    if algorithm in SPECULATIVE_ALGORITHMS:
        return SPECULATIVE_RESET, (f"SGLang's reset to {SPECULATIVE_RESET} under {algorithm} speculation "
                                   "(no --max-running-requests set)")
    return None, ""


def graphs_for(running: int, scenario: Scenario, server: ServerConfig) -> tuple[dict[str, int], str]:
    """The decode CUDA-graph cap to set with a running cap of `running`, and the words for the summary.

    SGLang captures decode CUDA graphs for batches up to --cuda-graph-max-bs and runs larger batches eagerly,
    every kernel launched from the host each step. A cap the user set below the running requests a round
    raises to (4 graphs for 64 running requests) is raised with it, to the new running cap or SGLang's own
    default for the GPU's memory (256 at 60-160 GB), whichever is smaller; an unset cap is SGLang's choice.
    """
    cap = server.cuda_graph_max_bs
    if cap is None or cap >= running:
        return {}, ""
    raised = min(running, max(default_chunked_prefill(scenario.hardware.spec.hbm_gb)[1], cap))
    if raised <= cap:
        return {}, ""
    return {"cuda_graph_max_bs": raised}, f", cuda-graph-max-bs {raised} (from {cap})"


def weight_gb_per_gpu(model: ModelSpec, server: ServerConfig, tp: int) -> float:
    return model.weight_bytes(server.weight_dtype) / tp / GIB


def smallest_replica_tp(model: ModelSpec, scenario: Scenario) -> int:
    """Smallest TP whose weights take <= 25% of a GPU's HBM, leaving the rest for long-context KV; where that is
    no smaller than the current TP, for an MoE or on GPUs without NVLink, the smallest whose KV pool holds its
    share of the load (for a dense model, among TPs whose weights take at most half the HBM).

    Casebook: "TP2 x 4 replicas" (case 1), "TP2 x 2" (case 2). A model that small on one GPU (an 8B BF16
    model is 20% of an 80 GB H100; the 27B in FP8 19% of an H200) is offered as TP1 replicas too, plain data
    parallelism, and the measurement decides ("this trade-off varies by case", case 1 round 4).
    """
    server = main_server(scenario)
    hbm = scenario.hardware.spec.hbm_gb
    tp = 1
    while tp < scenario.hardware.gpus_per_node and weight_gb_per_gpu(model, server, tp) > 0.25 * hbm:
        tp *= 2
    # A node's worth of GPUs may not hold the weights at all (Llama-3.1-405B in BF16: 94.5 GiB a GPU at TP8 on
    # H100s): the replicas start at the smallest TP whose server starts.
    while tp < server.tp_size and not server_starts(model, scenario.hardware, at_tp(server, tp)):
        tp *= 2
    pcie_only = scenario.hardware.spec.nvlink_gbps <= 0
    if tp < server.tp_size and (model.is_moe or pcie_only) and weight_gb_per_gpu(model, server, tp) > 0.25 * hbm:
        # Even a node's width leaves the weights more than a quarter of each GPU: the casebook's capacity
        # calculation decides whether such a replica holds its share of the load (Kimi-K2 in FP8 as TP8 on
        # H200s: 120 GiB of weights a GPU, a pool of 104,350 tokens against the 576,000 that 48 requests at a
        # 12,000-token p95 context need, so TP16 stays one instance).
        while tp < server.tp_size and kv_shortfall(model, scenario, at_tp(server, tp),
                                                   scenario.deployment.total_gpus() // tp) is not None:
            tp *= 2
        return tp
    if tp < server.tp_size or not (model.is_moe or pcie_only):
        return tp
    # The 25% rule is the casebook's for dense models on NVLink GPUs, whose KV grows with their weights. An
    # MoE's weights are mostly experts while its KV is its attention's; and on GPUs without NVLink (L40S) every
    # TP layer's all-reduce crosses PCIe, where a dense 27B's TP8 on 48 GB GPUs is what the rule leaves (TP4
    # would be 28% of a GPU). There the casebook's capacity calculation decides instead: the smallest TP whose
    # instance starts and whose KV pool holds its share of the clients at the p95 context, a dense model
    # keeping at least half of each GPU for KV, activations and graphs.
    smaller = 1
    while smaller < server.tp_size:
        roomy = model.is_moe or weight_gb_per_gpu(model, server, smaller) <= 0.5 * hbm
        if roomy and kv_shortfall(model, scenario, at_tp(server, smaller),
                                  scenario.deployment.total_gpus() // smaller) is None:
            return smaller
        smaller *= 2
    return tp


def no_smaller_tp(model: ModelSpec, scenario: Scenario) -> str:
    """Why `smallest_replica_tp` leaves the deployment's TP as it is, with the figure that decides it."""
    server = main_server(scenario)
    tp, hbm = server.tp_size, scenario.hardware.spec.hbm_gb
    if tp <= 1:
        return "TP1 is already the smallest TP."
    half = tp // 2
    weights = weight_gb_per_gpu(model, server, half)
    if weights >= hbm:
        return f"At TP{half} the weights alone ({weights:.0f} GiB) would not fit a {hbm:g} GB GPU: TP{tp} stays one instance."
    if not server_starts(model, scenario.hardware, at_tp(server, half)):
        return (f"At TP{half} the weights ({weights:.0f} GiB of each {hbm:g} GB GPU) leave too little to start a "
                f"server: TP{tp} stays one instance.")
    if not (model.is_moe or scenario.hardware.spec.nvlink_gbps <= 0):
        return (f"At TP{half} the weights would take {weights:.0f} GiB of each {hbm:g} GB GPU ({weights / hbm:.0%}), "
                "more than the quarter the casebook's replica splits leave them (the rest holds long-context KV): "
                f"TP{tp} stays one instance.")
    if not model.is_moe and weights > 0.5 * hbm:
        return (f"At TP{half} the weights would take {weights:.0f} GiB of each {hbm:g} GB GPU ({weights / hbm:.0%}), "
                f"more than half, too little left for KV, activations and graphs: TP{tp} stays one instance.")
    short = kv_shortfall(model, scenario, at_tp(server, half), scenario.deployment.total_gpus() // half)
    return f"At TP{half} {short or 'no instance would hold its share of the load'}: TP{tp} stays one instance."


def kv_need(scenario: Scenario, replicas: int) -> tuple[float, int, int]:
    """(clients per instance, p95 context, the tokens they hold): casebook "Capacity Calculation", every request
    in flight at the p95 context ("p95 scenario (28,000 tokens x 25 requests)")."""
    workload = scenario.workload
    clients = (clients_of(scenario) or 1) / max(replicas, 1)
    context = workload.input.p95_tokens() + workload.output.p95_tokens()
    return clients, context, math.ceil(clients * context)


def kv_shortfall(model: ModelSpec, scenario: Scenario, server: ServerConfig, replicas: int) -> str | None:
    """Why `replicas` instances of `server` could not hold the load's KV (None when they can)."""
    try:
        pool = resolve_server(model, scenario.hardware, server).pool_tokens
    except ServerStartError as exc:
        return f"it would not start: {exc}"
    clients, context, need = kv_need(scenario, replicas)
    if pool >= need:
        return None
    return (f"its KV pool of {pool:,} tokens per instance is short of the {need:,} that {clients:g} requests at "
            f"the p95 context of {context:,} tokens need")


# Expert-parallel settings that mean nothing without EP (`ep_size` 1), unset together with it.
EP_OFF: dict[str, object] = {"ep_size": 1, "moe_a2a_backend": None, "enable_eplb": False, "eplb_algorithm": None,
                             "eplb_rebalance_num_iterations": None, "ep_num_redundant_experts": None}
TWO_BATCH_OVERLAP = "--enable-two-batch-overlap"


def without_ep(server: ServerConfig) -> ServerConfig:
    """`server` as a plain TP instance: no expert parallelism, EPLB, all-to-all or DP attention."""
    extra = {k: v for k, v in server.extra.items() if k != TWO_BATCH_OVERLAP}
    return msgspec.structs.replace(server, attention_dp_size=1, extra=extra, **EP_OFF)  # type: ignore[arg-type]


def at_tp(server: ServerConfig, tp: int) -> ServerConfig:
    """`server` re-cut to one TP `tp` instance on `tp` GPUs: no pipeline stages or data-parallel copies (the
    router's replicas take their place; TP8 x PP2 over two nodes split into TP4 replicas would otherwise ask
    for 32 GPUs). EP and DP attention live inside the TP group (SGLang requires both to divide tp-size), so
    they shrink with it; with no EP left its own settings go too (EP2 on a TP2 35B-A3B split into TP1
    replicas would otherwise be refused: ep-size 2 on one GPU)."""
    ep, attention_dp = math.gcd(max(server.ep_size, 1), tp), math.gcd(max(server.attention_dp_size, 1), tp)
    if server.ep_size > 1 and ep == 1:
        server = without_ep(server)
    elif ep != server.ep_size:
        redundant = server.ep_num_redundant_experts and ep
        server = msgspec.structs.replace(server, ep_size=ep, ep_num_redundant_experts=redundant or None)
    return msgspec.structs.replace(server, tp_size=tp, pp_size=1, dp_size=1, attention_dp_size=attention_dp)


# sglang-router's --balance-abs-threshold: cache_aware balances load only while the busiest worker holds more
# than this many requests over the idlest (and 1.5x as many).
BALANCE_ABS_DEFAULT = 64


def clients_of(scenario: Scenario) -> int:
    """The requests the benchmark keeps in flight: the bench's concurrency, else the workload's peak."""
    return scenario.bench.max_concurrency or scenario.workload.peak_concurrency or 0


def fit_balance(router: RouterConfig, scenario: Scenario, workers: int) -> RouterConfig:
    """A cache_aware router whose load balancing can fire at this load.

    With no more clients than the default threshold of 64 in all, no worker can ever hold 64 more than another,
    so cache_aware routes on prefix matches alone; where every prompt's shared prefix passes the cache
    threshold (a 20,000-token agent system prompt), every request goes to the first worker that cached it
    (9B on four H100s at 64 agent streams: 642 tok/s against round_robin's 1,977). The threshold becomes one
    worker's share of the clients (16 there: 1,969 tok/s), so affinity holds until a worker carries a whole
    share more than another. A threshold the user set is kept, and an SMG router is left to its own policy; one
    this rule set for the deployment's current workers (one worker's share of them) follows a new worker count
    (TP4 x 2 at 25 clients balances at 13; its TP1 x 8 re-cut at 4, as from TP8).
    """
    clients = clients_of(scenario)
    current = sum(g.replicas for g in scenario.deployment.groups if g.role != "prefill")
    ours = clients and router.balance_abs_threshold == max(1, math.ceil(clients / max(current, 1)))
    # sglang-router 0.3.2's algorithm (SMG's cache_aware spills against the fleet mean instead).
    if (router.policy != "cache_aware" or router.package != "sglang-router"
            or (router.balance_abs_threshold is not None and not ours)
            or workers < 2 or not clients or clients > BALANCE_ABS_DEFAULT):
        return router
    return msgspec.structs.replace(router, balance_abs_threshold=max(1, math.ceil(clients / workers)))


def router_note(router: RouterConfig | None, before: RouterConfig | None = None) -> str:
    """", balance-abs-threshold N" when `router` sets a threshold `before` did not have, for a summary."""
    if router is None or router.balance_abs_threshold is None:
        return ""
    if before is not None and before.balance_abs_threshold == router.balance_abs_threshold:
        return ""
    return f" (balance-abs-threshold {router.balance_abs_threshold})"


def router_ports(deployment: Deployment) -> tuple[RouterConfig, int]:
    """The router a re-cut deployment sits behind and its workers' first port: a deployment without a router
    gets one on its instance's port, the workers the next ones; one with a router keeps its ports (one layout,
    one set of ports, so the same layout from two starts is one candidate)."""
    group = deployment.groups[0]
    if deployment.router is None:
        return RouterConfig(port=group.base_port), group.base_port + 1
    return deployment.router, group.base_port


def without_router(deployment: Deployment, worker: WorkerGroup) -> Deployment:
    """`worker` as a deployment's only, unrouted worker: one worker needs no router (and SGLang's power_of_two
    refuses one), so it takes the router's port."""
    port = deployment.router.port if deployment.router is not None else worker.base_port
    return Deployment(groups=[msgspec.structs.replace(worker, base_port=port)])


def replica_split(scenario: Scenario, tp: int, policy: str) -> Deployment:
    """The deployment's GPUs re-cut into TP `tp` replicas behind a router (casebook case 1 round 4)."""
    group = scenario.deployment.groups[0]
    gpus = scenario.deployment.total_gpus()
    server = at_tp(group.server, tp)
    replicas = max(1, gpus // tp)
    router, base_port = router_ports(scenario.deployment)
    router = fit_balance(msgspec.structs.replace(router, policy=policy), scenario, replicas)
    worker = WorkerGroup(name=group.name, role="unified", replicas=replicas, base_port=base_port, server=server)
    return Deployment(groups=[worker], router=router)


def recompute_ms(tokens: int, model: ModelSpec, scenario: Scenario) -> float:
    """Prefill time of `tokens` on one instance: 2 x active params FLOP per token at 60% of peak."""
    server = main_server(scenario)
    spec = scenario.hardware.spec
    tflops = spec.fp8_tflops if server.weight_dtype == "fp8" and spec.supports_fp8 else spec.bf16_tflops
    flops = tokens * 2 * model.params_active
    return flops / (tflops * 1e12 * server.world_size * EFFECTIVE_COMPUTE) * 1e3


def transfer_ms(tokens: int, model: ModelSpec, scenario: Scenario) -> float:
    """Host-to-GPU time of `tokens` of KV over PCIe (casebook: 1.92 GB / 64 GB/s = 30 ms)."""
    server = main_server(scenario)
    per_token = model.kv_bytes_per_token(server.kv_dtype)
    # The casebook's "GB" here is 10^6 of its 1,024-byte KB (20,000 x 96 KB = 1.92 GB).
    return tokens * per_token / 1024 / 1e6 / scenario.hardware.spec.pcie_gbps * 1e3


def reused_prefix_tokens(scenario: Scenario) -> int:
    """Tokens a cache hit saves per request: a shared document, else the system prompt and tool definitions."""
    prefix = scenario.workload.prefix
    if prefix.documents is not None:
        return prefix.documents.tokens
    return prefix.system_prompt_tokens + prefix.tool_definition_tokens


def dtype_ok(name: str | None) -> bool:
    try:
        dtype_bytes(name)
    except ValueError:
        return False
    return True
