"""Deployment consistency: do the worker groups fit the hardware, and do their settings agree?

Each check returns `ValidationIssue`s; none raises. Rules cite where they come from: SGLang's own
argument checks (`srt/server_args.py`, `arg_groups/*_hook.py`), the router's (`sglang_router`), and the
casebook (HiCache needs pages larger than one token; multi-node instances are whole nodes).
"""

from __future__ import annotations

from collections import defaultdict

from service.domain import Deployment, Hardware, PlacedWorker, ServerConfig, WorkerGroup
from service.sglang.values import ValidationIssue

_SPECULATIVE_FIELDS = ("speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
                       "speculative_num_draft_tokens")
# Algorithms that draft with the target model itself (no draft checkpoint): srt/speculative/spec_info.py.
_SELF_DRAFTING = frozenset({"NEXTN", "NGRAM"})
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "127.0.0.1", "localhost"})


def group_field(index: int, name: str = "") -> str:
    """Scenario path of a worker group's field (`deployment.groups[1].server.page-size`)."""
    base = f"deployment.groups[{index}]"
    return f"{base}.{name}" if name else base


def check_groups(deployment: Deployment) -> list[ValidationIssue]:
    """Per-group sanity: names, counts, ports, parallel sizes and settings that need each other."""
    issues: list[ValidationIssue] = []
    if not deployment.groups:
        issues.append(ValidationIssue(field="deployment.groups", message="the deployment has no worker groups",
                                      hint="add at least one [[deployment.groups]]"))
    seen: dict[str, int] = {}
    for index, group in enumerate(deployment.groups):
        if group.name in seen:
            issues.append(ValidationIssue(field=group_field(index, "name"),
                                          message=f"group name {group.name!r} is also used by groups[{seen[group.name]}]",
                                          hint="give every group its own name"))
        seen.setdefault(group.name, index)
        issues += _check_counts(index, group)
        issues += check_server(index, group.server)
    return issues


def _check_counts(index: int, group: WorkerGroup) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    server = group.server
    for name, value in (("replicas", group.replicas), ("server.tp-size", server.tp_size),
                        ("server.dp-size", server.dp_size), ("server.pp-size", server.pp_size),
                        ("server.ep-size", server.ep_size), ("server.attention-dp-size", server.attention_dp_size)):
        if value < 1:
            issues.append(ValidationIssue(field=group_field(index, name), message=f"{name} is {value}",
                                          hint="use 1 or more"))
    for name, port in (("base_port", group.base_port), ("bootstrap_port", group.bootstrap_port)):
        if port is not None and not 1 <= port <= 65535 - max(group.replicas - 1, 0):
            issues.append(ValidationIssue(field=group_field(index, name),
                                          message=f"{name} {port} leaves no room for {group.replicas} replicas",
                                          hint="use a port between 1024 and 65535"))
    return issues


def check_server(index: int, server: ServerConfig) -> list[ValidationIssue]:
    """Settings of one server that SGLang or the casebook says must agree with each other."""
    field = group_field(index, "server")
    issues: list[ValidationIssue] = []
    world = server.world_size
    if server.ep_size > 1 and (server.ep_size > world or world % server.ep_size):
        issues.append(ValidationIssue(
            field=f"{field}.ep-size", flag="--ep-size",
            message=f"ep-size {server.ep_size} does not divide the server's {world} GPUs (tp x pp x dp)",
            hint=f"use an ep-size that divides {world}, such as {world}"))
    if server.attention_dp_size > 1 and server.tp_size % server.attention_dp_size:
        issues.append(ValidationIssue(
            field=f"{field}.attention-dp-size",
            message=f"attention-dp-size {server.attention_dp_size} does not divide tp-size {server.tp_size}",
            hint="DP attention splits the TP group; use a divisor of tp-size"))
    if server.attention_dp_size > 1 and server.dp_size > 1:
        issues.append(ValidationIssue(
            field=f"{field}.dp-size", message="dp-size and attention-dp-size are both set",
            hint="attention DP lives inside the TP group: set attention-dp-size only, and use replicas for copies"))
    issues += _check_hicache(field, server)
    issues += _check_speculative(field, server)
    if server.enable_eplb and server.ep_size <= 1:
        issues.append(ValidationIssue(field=f"{field}.enable-eplb", severity="warning",
                                      message="enable-eplb without expert parallelism does nothing",
                                      hint="set ep-size above 1, or drop enable-eplb"))
    return issues


def _check_hicache(field: str, server: ServerConfig) -> list[ValidationIssue]:
    if not server.enable_hierarchical_cache:
        stray = [name for name in ("hicache_ratio", "hicache_size", "hicache_write_policy", "hicache_io_backend")
                 if getattr(server, name) is not None]
        return [ValidationIssue(field=f"{field}.{stray[0].replace('_', '-')}", severity="warning",
                                message=f"{', '.join(stray)} set without enable-hierarchical-cache; SGLang ignores it",
                                hint="set enable-hierarchical-cache = true, or drop the hicache settings")] if stray else []
    if server.disable_radix_cache:
        return [ValidationIssue(field=f"{field}.disable-radix-cache",
                                message="HiCache extends the radix cache, which disable-radix-cache turns off",
                                hint="drop disable-radix-cache")]
    if server.page_size is None or server.page_size <= 1:
        # Casebook, case 2 round 3: with one token per page the hierarchical cache does not operate.
        return [ValidationIssue(field=f"{field}.page-size", flag="--page-size",
                                message=f"HiCache needs KV pages larger than one token; page-size is {server.page_size}",
                                hint="set page-size = 64 (the casebook's value)")]
    return []


def _check_speculative(field: str, server: ServerConfig) -> list[ValidationIssue]:
    set_fields = [name for name in _SPECULATIVE_FIELDS if getattr(server, name) is not None]
    if server.speculative_algorithm is None:
        if not set_fields:
            return []
        return [ValidationIssue(field=f"{field}.{set_fields[0].replace('_', '-')}",
                                message=f"{', '.join(set_fields)} set without speculative-algorithm",
                                hint="set speculative-algorithm (EAGLE3, EAGLE, NEXTN, ...) or drop these")]
    algorithm = server.speculative_algorithm.upper()
    if algorithm not in _SELF_DRAFTING and server.speculative_draft_model_path is None:
        return [ValidationIssue(field=f"{field}.speculative-draft-model-path",
                                message=f"speculative-algorithm {server.speculative_algorithm} needs a draft model",
                                hint="set speculative-draft-model-path to a draft trained for this model "
                                     "(a Hugging Face id or a folder)")]
    return []


def check_hardware_fit(deployment: Deployment, hardware: Hardware) -> list[ValidationIssue]:
    """GPU totals, whole-node instances, and GPUs the placement would have to invent."""
    issues: list[ValidationIssue] = []
    per_node = hardware.gpus_per_node
    needed = deployment.total_gpus()
    if needed > hardware.total_gpus:
        issues.append(ValidationIssue(
            field="deployment", message=f"the deployment needs {needed} GPUs; the hardware has {hardware.total_gpus}",
            hint="lower replicas or tp/pp/dp sizes, or add nodes"))
    for index, group in enumerate(deployment.groups):
        world = group.server.world_size
        if world > per_node and world % per_node:
            issues.append(ValidationIssue(
                field=group_field(index, "server.tp-size"),
                message=f"one server spans {world} GPUs, which is not a whole number of {per_node}-GPU nodes",
                hint=f"multi-node servers fill whole nodes: use a multiple of {per_node}"))
        if group.first_gpu is not None and not 0 <= group.first_gpu < hardware.total_gpus:
            issues.append(ValidationIssue(field=group_field(index, "first_gpu"),
                                          message=f"first_gpu {group.first_gpu} is not a GPU of this hardware",
                                          hint=f"use 0..{hardware.total_gpus - 1}"))
    if hardware.node_hosts and len(hardware.node_hosts) != hardware.nodes:
        issues.append(ValidationIssue(field="hardware.node_hosts",
                                      message=f"{len(hardware.node_hosts)} node_hosts for {hardware.nodes} nodes",
                                      hint="list one host per node"))
    return issues


def check_placement(placed: list[PlacedWorker], deployment: Deployment, hardware: Hardware) -> list[ValidationIssue]:
    """Two workers on one GPU, GPUs beyond the hardware, and two listeners on one host:port."""
    issues: list[ValidationIssue] = []
    index_of = {group.name: i for i, group in enumerate(deployment.groups)}
    owners: dict[tuple[int, int], PlacedWorker] = {}
    for worker in placed:
        where = group_field(index_of.get(worker.group, 0))
        if worker.node >= hardware.nodes or any(gpu >= hardware.gpus_per_node for gpu in worker.gpus):
            issues.append(ValidationIssue(
                field=where, message=f"{_name(worker)} would need GPUs {worker.gpus} on node {worker.node}, "
                                     f"beyond the {hardware.nodes} x {hardware.gpus_per_node} GPUs",
                hint="lower replicas, move first_gpu, or add nodes"))
            continue
        for gpu in worker.gpus:
            other = owners.setdefault((worker.node, gpu), worker)
            if other is not worker:
                issues.append(ValidationIssue(
                    field=f"{where}.first_gpu", message=f"{_name(worker)} and {_name(other)} both use GPU {gpu} "
                                                        f"on node {worker.node}",
                    hint="give each group its own GPUs (first_gpu) or fewer replicas"))
                break
    return issues + check_ports(placed, deployment, hardware)


def check_ports(placed: list[PlacedWorker], deployment: Deployment, hardware: Hardware) -> list[ValidationIssue]:
    """Every listener (HTTP, PD bootstrap, rendezvous, router, router metrics) has its own host:port."""
    listeners: dict[tuple[str, int], list[str]] = defaultdict(list)
    for worker in placed:
        if worker.node_rank:
            continue
        listeners[(worker.host, worker.port)].append(f"{_name(worker)} HTTP")
        if worker.role == "prefill" and worker.bootstrap_port is not None:
            listeners[(worker.host, worker.bootstrap_port)].append(f"{_name(worker)} bootstrap")
        if worker.dist_init_addr:
            host, _, port = worker.dist_init_addr.rpartition(":")
            listeners[(host, int(port))].append(f"{_name(worker)} --dist-init-addr")
    router = deployment.router
    if router is not None:
        host = hardware.host(0) if router.host in _WILDCARD_HOSTS else router.host
        listeners[(host, router.port)].append("the router")
        if router.prometheus_port is not None:
            listeners[(host, router.prometheus_port)].append("the router's metrics")
    return [ValidationIssue(field="deployment", message=f"{' and '.join(users)} all listen on {host}:{port}",
                            hint="give each listener its own port (base_port, bootstrap_port, router.port)")
            for (host, port), users in listeners.items() if len(users) > 1]


def check_roles(deployment: Deployment) -> list[ValidationIssue]:
    """PD disaggregation needs both roles, a bootstrap port on prefill, and a router in front."""
    roles = {group.role for group in deployment.groups}
    issues: list[ValidationIssue] = []
    router = deployment.router
    if deployment.is_pd:
        if roles != {"prefill", "decode"}:
            issues.append(ValidationIssue(field="deployment.groups",
                                          message=f"PD disaggregation needs prefill and decode groups only; got {sorted(roles)}",
                                          hint="give every group role prefill or decode"))
        if router is None:
            issues.append(ValidationIssue(field="deployment.router", message="PD roles without a router",
                                          hint="add [deployment.router]; it pairs prefill and decode workers"))
        for index, group in enumerate(deployment.groups):
            if group.role == "prefill" and group.bootstrap_port is None:
                issues.append(ValidationIssue(field=group_field(index, "bootstrap_port"),
                                              flag="--disaggregation-bootstrap-port",
                                              message=f"prefill group {group.name!r} has no bootstrap port",
                                              hint="set bootstrap_port (SGLang's default is 8998)"))
    elif router is not None and (router.prefill_policy or router.decode_policy):
        issues.append(ValidationIssue(field="deployment.router", severity="warning",
                                      message="prefill_policy/decode_policy only apply to PD deployments",
                                      hint="set policy instead"))
    return issues + _check_router_size(deployment)


def _check_router_size(deployment: Deployment) -> list[ValidationIssue]:
    router = deployment.router
    serving = sum(group.replicas for group in deployment.groups if group.role != "prefill")
    if router is None:
        if sum(group.replicas for group in deployment.groups) > 1:
            return [ValidationIssue(field="deployment.router", severity="warning",
                                    message="several workers and no router: clients must spread the load themselves",
                                    hint="add [deployment.router] with a policy (casebook case 1: cache_aware)")]
        return []
    if serving >= 2:
        return []
    if not deployment.is_pd and router.policy == "power_of_two":
        # sglang_router: "Power-of-two policy requires at least 2 workers".
        return [ValidationIssue(field="deployment.router.policy", message="power_of_two needs at least 2 workers",
                                hint="use round_robin or cache_aware, or add replicas")]
    if deployment.is_pd and (router.decode_policy or router.policy) == "power_of_two":
        return [ValidationIssue(field="deployment.router.decode_policy", severity="warning",
                                message="power_of_two over a single decode server has nothing to choose between",
                                hint="fine for one large decode instance (casebook case 5); add decode replicas to use it")]
    return []


def _name(worker: PlacedWorker) -> str:
    rank = f" rank {worker.node_rank}" if worker.nnodes > 1 else ""
    return f"{worker.group}[{worker.replica}]{rank}"
