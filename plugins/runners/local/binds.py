"""Where a round's listeners bind: loopback unless the scenario names the cluster's hosts; never every
interface unless the operator opted in.

A benchmark round is no service: an SGLang server or router reachable from the network during it serves
anyone who finds it (SGLang has no authentication unless `--api-key` is set). So a worker binds to its
node's host (`hardware.node_hosts`, loopback on one node), the router to `deployment.router.host`, which
must be loopback or one of the node hosts, and a wildcard (`0.0.0.0`, `::`) is refused unless the runner
setting `allow_wildcard_bind` is on; then the round's notes carry a warning.
"""

from __future__ import annotations

import ipaddress

from plugins.runners.local.failures import RoundFailure
from service import RunnerSettings, Scenario

WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", "*", ""})
PROMETHEUS_HOST = "--prometheus-host"
_OPT_IN = ("set the runner setting allow_wildcard_bind = true (SGLANG_TUNER_RUNNER_ALLOW_WILDCARD_BIND=1) to "
           "listen on every interface on purpose")


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listener_hosts(scenario: Scenario) -> list[tuple[str, str]]:
    """(field, host) of every address the round's servers listen on, named as the scenario spells them."""
    hosts = [(f"hardware.node_hosts[{index}]", host) for index, host in enumerate(scenario.hardware.node_hosts)]
    router = scenario.deployment.router
    if router is not None:
        hosts.append(("deployment.router.host", router.host))
        metrics = router.extra.get(PROMETHEUS_HOST)
        if metrics is not None:
            hosts.append((f'deployment.router.extra["{PROMETHEUS_HOST}"]', str(metrics)))
    return hosts


def bind_warnings(scenario: Scenario, settings: RunnerSettings) -> list[str]:
    """Warnings for the round's notes about wildcard binds the operator allowed.

    Raises:
        RoundFailure: `validation`, naming the field, for a wildcard bind without the opt-in, or a router
            host that is neither loopback nor a node host of the scenario's cluster.
    """
    cluster = set(scenario.hardware.node_hosts)
    warnings = []
    for field, host in listener_hosts(scenario):
        if host in WILDCARDS:
            if not settings.allow_wildcard_bind:
                raise RoundFailure("validation", "validate",
                                   f"{field} = {host!r} would listen on every interface of this host; set it to "
                                   f"127.0.0.1 (or one of hardware.node_hosts), or {_OPT_IN}")
            warnings.append(f"warning: {field} = {host!r} listens on every interface during the round "
                            "(allow_wildcard_bind is on): anyone who can reach this host can send it requests")
        elif not is_loopback(host) and host not in cluster:
            raise RoundFailure("validation", "validate",
                               f"{field} = {host!r} is neither loopback nor one of hardware.node_hosts "
                               f"({', '.join(sorted(cluster)) or 'none named'}); set it to 127.0.0.1, or list "
                               "the cluster's hosts in hardware.node_hosts")
    return warnings


def metrics_host(scenario: Scenario) -> str:
    """The router's Prometheus host when the scenario names none: the router's own, loopback for a wildcard.

    sglang-router listens for Prometheus on 0.0.0.0 by default; the runner always says where instead.
    """
    router = scenario.deployment.router
    host = router.host if router is not None else "127.0.0.1"
    return "127.0.0.1" if host in WILDCARDS else host
