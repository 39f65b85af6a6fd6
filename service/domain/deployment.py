"""Deployments: worker groups with a typed SGLang server config per role, and a router.

A deployment is written as groups ("four TP2 replicas") and expanded into placed workers (GPU sets,
ports, node ranks) by `place_workers`. Server settings are typed and version-independent; the flag
renderer in `service.sglang` spells them for a chosen SGLang version. Any other launch flag goes in
`extra`, keyed by its full CLI spelling, and is checked against that version's flag catalogue.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from service.domain.hardware import Hardware

FlagValue = str | int | float | bool | list[str]
Role = Literal["unified", "prefill", "decode"]
# Every policy the tuner can simulate; a router package may lack some (prefix_hash and least_load are smg's).
RouterPolicy = Literal["cache_aware", "round_robin", "random", "power_of_two", "prefix_hash", "least_load"]
# The router a deployment launches: the frozen `sglang-router` or its successor SMG (sgl-model-gateway).
RouterPackage = Literal["sglang-router", "smg"]


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="kebab"):
    """Typed `sglang.launch_server` settings (names are SGLang's, spelled with dashes in files)."""

    model_path: str = ""
    tp_size: int = 1
    dp_size: int = 1
    pp_size: int = 1
    ep_size: int = 1
    attention_dp_size: int = 1
    moe_a2a_backend: str | None = None
    chunked_prefill_size: int | None = None
    enable_mixed_chunk: bool = False
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    mem_fraction_static: float | None = None
    schedule_conservativeness: float | None = None
    schedule_policy: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    page_size: int | None = None
    disable_radix_cache: bool = False
    enable_hierarchical_cache: bool = False
    hicache_ratio: float | None = None
    hicache_size: int | None = None
    hicache_write_policy: str | None = None
    hicache_io_backend: str | None = None
    hicache_storage_prefetch_policy: str | None = None
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    grammar_backend: str | None = None
    enable_eplb: bool = False
    eplb_algorithm: str | None = None
    eplb_rebalance_num_iterations: int | None = None
    ep_num_redundant_experts: int | None = None
    disaggregation_transfer_backend: str | None = None
    disaggregation_ib_device: str | None = None
    cuda_graph_max_bs: int | None = None
    enable_metrics: bool = True
    enable_cache_report: bool = False
    extra: dict[str, FlagValue] = msgspec.field(default_factory=dict)

    @property
    def world_size(self) -> int:
        """GPUs one server instance spans (DP attention lives inside TP; plain DP multiplies)."""
        dp = self.dp_size if self.attention_dp_size <= 1 and self.dp_size > 1 else 1
        return self.tp_size * self.pp_size * dp

    @property
    def weight_dtype(self) -> str:
        return "fp8" if self.quantization in ("fp8", "w8a8_fp8", "modelopt_fp8") else "bf16"

    @property
    def kv_dtype(self) -> str:
        return self.kv_cache_dtype if self.kv_cache_dtype not in (None, "auto", "bfloat16") else "bf16"


class WorkerGroup(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Identical replicas of one server role."""

    name: str = "worker"
    role: Role = "unified"
    replicas: int = 1
    base_port: int = 30000
    bootstrap_port: int | None = None
    first_gpu: int | None = None
    server: ServerConfig = ServerConfig()


class RouterConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Router settings: `python -m sglang_router.launch_router` (sglang-router) or `python -m smg.launch_router`.

    `package` names the router the deployment targets and `version` one of its shipped flag catalogues
    (unset: the newest shipped one, sglang-router 0.3.2 or smg 1.13.0); flags and policies are checked
    against it.
    """

    policy: RouterPolicy = "cache_aware"
    host: str = "127.0.0.1"
    port: int = 30000
    prefill_policy: RouterPolicy | None = None
    decode_policy: RouterPolicy | None = None
    cache_threshold: float | None = None
    balance_abs_threshold: int | None = None
    balance_rel_threshold: float | None = None
    prometheus_port: int | None = None
    extra: dict[str, FlagValue] = msgspec.field(default_factory=dict)
    package: RouterPackage = "sglang-router"
    version: str | None = None


class Deployment(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What runs: worker groups and, when there is more than one worker, a router."""

    groups: list[WorkerGroup]
    router: RouterConfig | None = None

    @property
    def is_pd(self) -> bool:
        return any(g.role != "unified" for g in self.groups)

    def total_gpus(self) -> int:
        return sum(g.replicas * g.server.world_size for g in self.groups)


class PlacedWorker(msgspec.Struct, frozen=True, kw_only=True):
    """One launched process: a replica's rank on one node."""

    group: str
    replica: int
    role: Role
    node: int
    node_rank: int
    nnodes: int
    host: str
    gpus: list[int]
    port: int
    bootstrap_port: int | None
    dist_init_addr: str | None
    server: ServerConfig

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


DIST_INIT_PORT = 5000


def place_workers(deployment: Deployment, hardware: Hardware) -> list[PlacedWorker]:
    """Assign GPUs, nodes and ports to every replica, in group order, packing GPUs from GPU 0.

    A replica wider than one node spans whole nodes (`--nnodes`, `--node-rank`, `--dist-init-addr`).
    Placement never checks for conflicts; `service.sglang.validate` does, so errors can name the fault.
    """
    placed: list[PlacedWorker] = []
    cursor = 0
    per_node = hardware.gpus_per_node
    for group in deployment.groups:
        world = group.server.world_size
        if group.first_gpu is not None:
            cursor = group.first_gpu
        for replica in range(group.replicas):
            nnodes = max(1, -(-world // per_node))
            if nnodes > 1 and cursor % per_node:
                cursor += per_node - cursor % per_node  # multi-node replicas start on a node boundary
            first_node = cursor // per_node
            port = group.base_port + replica
            bootstrap = None if group.bootstrap_port is None else group.bootstrap_port + (
                replica if _hosts_share(group, hardware, world) else 0)
            dist = f"{hardware.host(first_node)}:{DIST_INIT_PORT + replica}" if nnodes > 1 else None
            for rank in range(nnodes):
                width = min(world, per_node)
                start = cursor + rank * per_node if nnodes > 1 else cursor
                node = start // per_node
                placed.append(PlacedWorker(
                    group=group.name, replica=replica, role=group.role, node=node, node_rank=rank,
                    nnodes=nnodes, host=hardware.host(node),
                    gpus=[start % per_node + i for i in range(width)],
                    port=port, bootstrap_port=bootstrap, dist_init_addr=dist, server=group.server,
                ))
            cursor += nnodes * per_node if nnodes > 1 else world
    return placed


def _hosts_share(group: WorkerGroup, hardware: Hardware, world: int) -> bool:
    """Replicas of a group share a host (and so need distinct bootstrap ports) when several fit a node."""
    return world < hardware.gpus_per_node and group.replicas > 1
