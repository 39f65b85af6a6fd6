"""Listener ports: checking the deployment's ports are free, and moving them to free loopback ports.

Moving ports (`remap_ports` in the runner settings) lets rounds run beside other services, as in CI. The
mapping is kept for the runner's lifetime, so the same deployment always gets the same argv back.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

import msgspec

from plugins.runners.local.binds import PROMETHEUS_HOST, metrics_host
from plugins.runners.local.launch import LaunchSpec
from plugins.runners.local.lifetime import TCP_STATES, command_line, listening_inodes, socket_owners, tcp_sockets
from plugins.runners.local.readiness import port_free
from service import Scenario

LOOPBACK = "127.0.0.1"


def _ephemeral() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def free_block(size: int, attempts: int = 200, avoid: frozenset[int] = frozenset()) -> int:
    """The first port of `size` consecutive free loopback ports, none of them in `avoid`.

    A probed port is free again as soon as the probe closes, so two calls can draw the same one: callers
    pass the ports they already handed out in `avoid`.
    """
    for _ in range(attempts):
        start = _ephemeral()
        block = range(start, start + size)
        if start + size < 65535 and not avoid.intersection(block) and all(port_free(LOOPBACK, k) for k in block):
            return start
    raise OSError(f"no {size} consecutive free ports found")


class PortMap:
    """Original port blocks -> free blocks, stable while they stay free."""

    def __init__(self) -> None:
        self.blocks: dict[tuple[str, int, int], int] = {}

    def move(self, key: str, port: int, size: int = 1) -> int:
        """Where the block `port .. port+size-1` (named `key`) goes."""
        mapped = self.blocks.get((key, port, size))
        if mapped is None or not all(port_free(LOOPBACK, mapped + k) for k in range(size)):
            mapped = free_block(size, avoid=self._handed_out(exclude=(key, port, size)))
            self.blocks[(key, port, size)] = mapped
        return mapped

    def _handed_out(self, exclude: tuple[str, int, int]) -> frozenset[int]:
        """Every port of every other block this map has handed out."""
        return frozenset(start + k for block, start in self.blocks.items() if block != exclude
                         for k in range(block[2]))

    def remap(self, scenario: Scenario) -> Scenario:
        """The scenario with every worker, bootstrap, router and router-metrics port moved."""
        deployment = scenario.deployment
        groups = []
        for group in deployment.groups:
            changes: dict[str, int] = {"base_port": self.move(f"{group.name}.http", group.base_port, group.replicas)}
            if group.bootstrap_port is not None:
                changes["bootstrap_port"] = self.move(f"{group.name}.bootstrap", group.bootstrap_port, group.replicas)
            groups.append(msgspec.structs.replace(group, **changes))
        router = deployment.router
        if router is not None:
            metrics_port = router.prometheus_port if router.prometheus_port is not None else 29000
            router = msgspec.structs.replace(router, port=self.move("router", router.port),
                                             prometheus_port=self.move("router.metrics", metrics_port))
        return msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(
            deployment, groups=groups, router=router))


BOOTSTRAP_FLAG = "--disaggregation-bootstrap-port"
ROUTER_METRICS_PORT = 29000  # sglang-router's Prometheus port when the scenario names none


def worker_listeners(specs: Sequence[LaunchSpec]) -> list[tuple[str, int]]:
    """The workers' HTTP listeners (rank 0 of each server) and the PD prefill servers' bootstrap ports."""
    wanted = []
    for spec in specs:
        if spec.kind != "worker":
            continue
        if spec.url:
            wanted.append((spec.host, spec.port))
        if BOOTSTRAP_FLAG in spec.argv[:-1]:
            wanted.append((spec.host, int(spec.argv[spec.argv.index(BOOTSTRAP_FLAG) + 1])))
    return wanted


def listeners(scenario: Scenario, worker_ports: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Every (host, port) the launch will listen on: the workers' HTTP ports, the router and its metrics."""
    wanted = list(worker_ports)
    router = scenario.deployment.router
    if router is not None:
        wanted.append((router.host, router.port))
        metrics = router.prometheus_port if router.prometheus_port is not None else ROUTER_METRICS_PORT
        wanted.append((str(router.extra.get(PROMETHEUS_HOST, metrics_host(scenario))), metrics))
    return wanted


def busy_ports(scenario: Scenario, worker_ports: list[tuple[str, int]]) -> list[str]:
    """Listeners the launch needs that something already holds, each with its holder where /proc tells.

    For example `127.0.0.1:31000 (held by pid 4242: python -m service.emulator --port 31000 ...)`.
    """
    return [f"{host}:{port} ({port_holder(port)})" for host, port in listeners(scenario, worker_ports)
            if not port_free(host, port)]


def port_holder(port: int) -> str:
    """Who holds `port`, as a phrase: the PIDs and command lines of the listeners' owners, else the
    connections whose local end it is."""
    owners = socket_owners(listening_inodes(port))
    if owners:
        return "; ".join(f"held by pid {pid}: {command_line(pid)[:200] or '?'}" for pid in owners[:3])
    ends = [(state, inode) for state, inode in tcp_sockets(port) if state != "0A"]
    if not ends:
        return "holder not visible here: another user's process or another network namespace"
    states = ", ".join(sorted({TCP_STATES.get(state, state) for state, _ in ends}))
    users = socket_owners({inode for _, inode in ends if inode != "0"})
    by = "".join(f"; pid {pid}: {command_line(pid)[:200] or '?'}" for pid in users[:3])
    low, high = ephemeral_range()
    # A listener's port inside this range can be handed to any outgoing connection between two rounds.
    why = f": ports {low}-{high} go to outgoing connections, so name ports outside them" if low <= port <= high else ""
    return f"not a listener but the local end of a connection ({states}{by}){why}"


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to outgoing connections (Linux's default where it cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999
