"""The Ray cluster a round runs on, and whether (and how many times) a deployment fits it.

A deployment asks for one placement-group bundle per node of its rendered topology (`place_workers`), each
bundle the GPUs its workers use on that node. One bundle is `STRICT_PACK`; several must land on distinct
nodes (`STRICT_SPREAD`), as a multi-node instance or a PD deployment's pools on their own nodes need.

`ray_address = "local"` starts a throwaway cluster on this host: a head without GPUs and one node per
scenario node (`hardware.nodes`, or the setting `ray_local_nodes`), each with the scenario's
`gpus_per_node` fake GPUs (`num_gpus`). It lives until the process exits.
"""

from __future__ import annotations

import atexit
import importlib
import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from plugins.runners.local.failures import RoundFailure
from service import RunnerSettings, Scenario, place_workers

INSTALL_HINT = "pip install 'sglang-tuner[ray]'"
_local: dict[str, Any] = {}


def import_ray() -> Any:
    """The `ray` module, or a `validation` failure naming the extra to install."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RoundFailure("ray_missing", "validate", f"the ray runner needs ray installed: {INSTALL_HINT}") from None


def address(settings: RunnerSettings) -> str:
    """The cluster to join: the setting `ray_address`, else `RAY_ADDRESS`, else `local`."""
    return settings.ray_address or os.environ.get("RAY_ADDRESS", "") or "local"


def connect(settings: RunnerSettings, scenario: Scenario) -> str:
    """Join the cluster (once per process; a process already connected stays on its cluster); its address."""
    ray = import_ray()
    if ray.is_initialized():
        return str(_local.get("address") or ray.get_runtime_context().gcs_address)
    where = address(settings)
    if where == "local":
        where = _start_local(settings, scenario)
    ray.init(address=where, ignore_reinit_error=True, log_to_driver=False, logging_level="ERROR")
    return where


def _start_local(settings: RunnerSettings, scenario: Scenario) -> str:
    from ray.cluster_utils import Cluster

    nodes = settings.ray_local_nodes or scenario.hardware.nodes
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0,
                                                            "include_dashboard": False})
    for _ in range(nodes):
        cluster.add_node(num_cpus=1, num_gpus=scenario.hardware.gpus_per_node)
    cluster.wait_for_nodes()
    _local.update(cluster=cluster, address=cluster.address)
    atexit.register(_stop_local)
    return str(cluster.address)


def _stop_local() -> None:
    ray = importlib.import_module("ray")
    ray.shutdown()
    cluster = _local.pop("cluster", None)
    if cluster is not None:
        cluster.shutdown()


@dataclass(frozen=True)
class GpuNode:
    """An alive cluster node and its GPUs (totals, not what is free now)."""

    node_id: str
    ip: str
    gpus: float


def gpu_nodes() -> list[GpuNode]:
    """Alive nodes with their total GPUs, from `ray.nodes()`."""
    ray = import_ray()
    return [GpuNode(node["NodeID"], node["NodeManagerAddress"], float(node["Resources"].get("GPU", 0)))
            for node in ray.nodes() if node.get("Alive")]


def bundles(scenario: Scenario) -> tuple[list[int], dict[int, int]]:
    """GPUs per bundle, one bundle per topology node in node order, and topology node -> bundle index."""
    per_node: dict[int, int] = defaultdict(int)
    for worker in place_workers(scenario.deployment, scenario.hardware):
        per_node[worker.node] += len(worker.gpus)
    order = sorted(per_node)
    return [per_node[node] for node in order], {node: index for index, node in enumerate(order)}


def strategy(sizes: list[int]) -> str:
    """`STRICT_PACK` for one bundle; several bundles are several nodes, so `STRICT_SPREAD`."""
    return "STRICT_PACK" if len(sizes) == 1 else "STRICT_SPREAD"


def _place_copy(sizes: list[int], free: list[float]) -> bool:
    """Take one copy's bundles from `free` (distinct nodes, best fit, largest bundle first); False if none."""
    used: set[int] = set()
    taken: list[tuple[int, int]] = []
    for size in sorted(sizes, reverse=True):
        fits = [i for i, gpus in enumerate(free) if i not in used and gpus >= size]
        if not fits:
            for index, size_taken in taken:
                free[index] += size_taken
            return False
        best = min(fits, key=lambda i: free[i])
        free[best] -= size
        used.add(best)
        taken.append((best, size))
    return True


def copies(sizes: list[int], nodes: list[GpuNode]) -> int:
    """How many copies of a deployment's placement group the nodes' total GPUs hold at once."""
    free = [node.gpus for node in nodes]
    count = 0
    while count < 1024 and _place_copy(sizes, free):
        count += 1
    return count


def shortfall(sizes: list[int], nodes: list[GpuNode]) -> str | None:
    """Why the cluster cannot hold the deployment even when idle, or None when it can."""
    if copies(sizes, nodes) > 0:
        return None
    have = ", ".join(f"{node.node_id[:8]} ({node.ip}) {node.gpus:g}" for node in nodes if node.gpus) or "none"
    wanted = " + ".join(f"{size}" for size in sizes)
    return (f"the deployment needs {len(sizes)} node(s) with {wanted} GPUs (one placement-group bundle per node, "
            f"{strategy(sizes)}); the cluster's nodes with GPUs: {have}")
