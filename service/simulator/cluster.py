"""Turning a scenario's deployment into simulated workers and routers.

Replicas behind a router are statistically identical when the router spreads requests without regard to
their content (or when prompts share nothing beyond a prefix every replica holds), so a large group is
simulated as one representative replica carrying its share of the traffic, and the figures are scaled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
import numpy as np

from service.components import StepCostModel
from service.domain import Hardware, ModelSpec, Scenario, ServerConfig, WorkerGroup
from service.simulator.batch import Recorder
from service.simulator.experts import ExpertBalance, expert_balance
from service.simulator.grammar import MASK_SECONDS, GrammarCache, grammar_backend, host_share
from service.simulator.memory import ResolvedServer, host_pool_tokens, request_bound, resolve_server
from service.simulator.radix import RadixCache
from service.simulator.requests import SimRequest
from service.simulator.router import Router
from service.simulator.speculative import speculative_settings
from service.simulator.step_cache import CachedStepCost
from service.simulator.worker import Worker, WorkerSetup

BindCost = Callable[[ServerConfig], StepCostModel]
# A group this large behind a content-blind router is simulated as one replica.
REPRESENTATIVE_MIN_REPLICAS = 6


@dataclass
class Pool:
    """Workers of one role, the router policy in front of them, and their grammar caches."""

    role: str
    workers: list[Worker]
    router: Router
    grammar: list[GrammarCache | None]
    resolved: ResolvedServer
    server: ServerConfig
    replicas: int
    balance: ExpertBalance | None


@dataclass
class Cluster:
    """Everything simulated for one round."""

    pools: dict[str, Pool]
    recorder: Recorder
    scale: int = 1
    costs: list[StepCostModel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def is_pd(self) -> bool:
        return "prefill" in self.pools

    def all_workers(self) -> list[Worker]:
        return [w for pool in self.pools.values() for w in pool.workers]


def plain_dp(group: WorkerGroup) -> WorkerGroup:
    """`group` with a plain data-parallel server (`--dp-size` without DP attention) as its DP ranks: SGLang's
    DataParallelController runs one scheduler, radix cache and KV pool per rank, each a TP group of its own, and
    hands requests to them in turn (`--load-balance-method auto` resolves to round_robin outside PD,
    `arg_groups/serving_hook.py`). So each rank is simulated as a replica of the TP server."""
    server = group.server
    if server.dp_size <= 1 or server.attention_dp_size > 1:
        return group
    return msgspec.structs.replace(group, replicas=group.replicas * server.dp_size,
                                   server=msgspec.structs.replace(server, dp_size=1))


def representative_scale(scenario: Scenario) -> int:
    """How many replicas one simulated replica stands for (1 = simulate every replica)."""
    dep = scenario.deployment
    if dep.is_pd or len(dep.groups) != 1:
        return 1
    group = plain_dp(dep.groups[0])
    policy = dep.router.policy if dep.router else "round_robin"
    prefix = scenario.workload.prefix
    content_free = policy not in ("cache_aware", "prefix_hash") or (prefix.documents is None and not prefix.conversations
                                               and scenario.bench.trace is None)
    return group.replicas if group.replicas >= REPRESENTATIVE_MIN_REPLICAS and content_free else 1


def build_cluster(scenario: Scenario, model: ModelSpec, bind: BindCost, rng: np.random.Generator,
                  on_finish: Callable[[SimRequest, float], None]) -> Cluster:
    """Workers for every group (raises `ServerStartError` when a server could not start)."""
    recorder = Recorder()
    scale = representative_scale(scenario)
    cluster = Cluster(pools={}, recorder=recorder, scale=scale)
    dep = scenario.deployment
    expanded = [plain_dp(g) for g in dep.groups]
    ranks = sorted({g.server.dp_size for g, ranked in zip(dep.groups, expanded, strict=True) if ranked is not g})
    for group in expanded:
        role = group.role
        policy = _policy(scenario, role)
        replicas = 1 if scale > 1 else group.replicas
        pool = cluster.pools.get(role)
        workers = _workers(scenario, model, group, replicas, bind, rng, recorder, on_finish, cluster,
                           first_index=len(pool.workers) if pool else 0)
        if pool is None:
            first = workers[0]
            cluster.pools[role] = Pool(role=role, workers=workers, router=Router(policy, 0, dep.router, rng),
                                       grammar=[], resolved=first.res, server=group.server,
                                       replicas=group.replicas, balance=expert_balance(model, group.server))
        else:
            pool.workers.extend(workers)
            pool.replicas += group.replicas
        target = cluster.pools[role]
        target.grammar.extend(_grammar(scenario, group.server, workers[0].res.world_size) for _ in workers)
    for pool in cluster.pools.values():
        pool.router = Router(pool.router.policy, len(pool.workers), dep.router, rng)
        pool.router.watch(_probe(pool.workers))
    if scale > 1:
        cluster.notes.append(f"{scale} identical replicas behind a {_policy(scenario, 'unified')} router were "
                             f"simulated as one representative replica carrying 1/{scale} of the traffic; "
                             "throughput is scaled back up")
    if ranks:
        alone = dep.router is None or all(g.replicas == 1 for g in dep.groups)
        cluster.notes.append(f"data-parallel servers (dp-size {', '.join(map(str, ranks))}) were simulated as one "
                             "scheduler per DP rank, each with its own KV pool and radix cache, "
                             + ("dispatched round-robin as SGLang's DP controller does" if alone else
                                "the router's policy spreading requests over every rank (SGLang's DP controller "
                                "inside each server dispatches round-robin)"))
    drafting = any(w.setup.spec is not None for w in cluster.all_workers())
    if drafting and scenario.workload.speculative.draft_acceptance is None:
        cluster.notes.append(f"speculative decoding was simulated with an assumed per-token draft acceptance of "
                             f"{scenario.workload.speculative.acceptance:g}: workload.speculative.draft_acceptance "
                             "is not given, and the speed-up follows it")
    staged = sorted({g.server.pp_size for g in dep.groups if g.server.pp_size > 1})
    if staged:
        cluster.notes.append(f"pipeline stages (pp-size {', '.join(map(str, staged))}) were simulated as one "
                             "instance running every layer in turn: a step takes the stages' time summed, with no "
                             "overlap of micro-batches across stages, so prefill throughput is under-counted")
    return cluster


def _probe(workers: list[Worker]) -> Callable[[int], tuple[int, float]]:
    """A worker's `sglang:num_queue_reqs` and `sglang:token_usage`, as SMG's load monitor polls them."""
    def probe(index: int) -> tuple[int, float]:
        worker = workers[index]
        return len(worker.waiting), worker.used_tokens / max(worker.res.pool_tokens, 1)
    return probe


def _policy(scenario: Scenario, role: str) -> str:
    router = scenario.deployment.router
    if router is None:
        return "round_robin"
    if role == "prefill" and router.prefill_policy:
        return router.prefill_policy
    if role == "decode" and router.decode_policy:
        return router.decode_policy
    return router.policy


def _workers(scenario: Scenario, model: ModelSpec, group: WorkerGroup, replicas: int, bind: BindCost,
             rng: np.random.Generator, recorder: Recorder, on_finish: Callable[[SimRequest, float], None],
             cluster: Cluster, first_index: int) -> list[Worker]:
    server = group.server
    hardware = scenario.hardware
    resolved = resolve_server(model, hardware, server)
    balance = expert_balance(model, server)
    backend = grammar_backend(scenario.workload.structured_output, server.grammar_backend)
    spec = speculative_settings(server, model, scenario.workload.speculative.acceptance, scenario.sglang_version)
    # The servers of this group on one node: as many as fit on it, no more than there are.
    per_node = max(min(float(group.replicas), hardware.gpus_per_node / max(resolved.world_size, 1)), 1.0)
    host = host_pool_tokens(resolved, server, hardware, per_node)
    workers = []
    for k in range(replicas):
        cost = CachedStepCost(bind(server))
        cluster.costs.append(cost)
        cache = RadixCache(page_size=resolved.page_size,
                           enabled=not server.disable_radix_cache and group.role != "decode",
                           host_capacity=host, write_policy=server.hicache_write_policy or "write_through")
        setup = WorkerSetup(
            index=first_index + k, role=group.role, resolved=resolved, cost=cost, spec=spec,
            mixed_chunk=server.enable_mixed_chunk, ignore_eos=scenario.bench.ignore_eos,
            step_factor=balance.step_factor(cost.includes_expert_skew()) if balance else 1.0,
            mask_seconds=MASK_SECONDS.get(backend, 0.0) if backend else 0.0,
            host_link_bytes_per_s=_host_link(hardware),
            prefill_decode_interval=_int_flag(server, "--prefill-decode-interval"),
            fallback_step_factor=balance.step_factor(False) if balance else None,
            max_req_len=request_bound(model, resolved, server.extra.get("--context-length")))
        workers.append(Worker(setup, cache, recorder, rng, on_finish))
    return workers


def _int_flag(server: ServerConfig, flag: str) -> int:
    """An integer flag of `extra`, 0 when absent (the flag catalogue has checked its type at the door)."""
    value = server.extra.get(flag, 0)
    if isinstance(value, list):
        raise TypeError(f"{flag} takes one integer, not a list: {value!r}")
    return int(value or 0)


def _host_link(hardware: Hardware) -> float:
    return hardware.spec.pcie_gbps * 1e9


def transfer_seconds(tokens: int, pool: Pool, hardware: Hardware) -> float:
    """PD KV transfer of one prompt from a prefill worker of `pool`: each GPU sends its share over its link.

    SGLang's default backend, Mooncake, moves KV by RDMA through each GPU's NIC, between two GPUs of one node as
    well (`distributed/device_communicators/mooncake_transfer_engine.py`: `MOONCAKE_PROTOCOL` defaults to
    "rdma"; its NVLink transport is opt-in through `SGLANG_MOONCAKE_CUSTOM_MEM_POOL`). NIXL's UCX moves it over
    NVLink (cuda_ipc) inside one node. The `fake` backend moves nothing.
    """
    backend = pool.server.disaggregation_transfer_backend or "mooncake"
    if backend == "fake":
        return 0.0
    nvlink = backend == "nixl" and hardware.nodes == 1 and hardware.spec.nvlink_gbps > 0
    per_gpu = hardware.spec.nvlink_gbps if nvlink else hardware.interconnect_gbps
    return 0.001 + tokens * pool.resolved.kv_bytes_per_gpu_token / (per_gpu * 1e9)


def _grammar(scenario: Scenario, server: ServerConfig, world_size: int) -> GrammarCache | None:
    """A freshly started server's grammar backend: empty unless the warm-up script compiled every schema."""
    structured = scenario.workload.structured_output
    backend = grammar_backend(structured, server.grammar_backend)
    if backend is None:
        return None
    hardware = scenario.hardware
    cache = GrammarCache(backend=backend, host=host_share(hardware.cpus_per_node, hardware.gpus_per_node, world_size))
    if structured.cache_warmed and not structured.dynamic_schemas:
        cache.warm(structured.schemas)
    return cache
