"""The rendered argv, with the hosts and ports of the nodes Ray chose, checked again before launch.

The `local` runner's launch plan (`plan_launch`: render, check token by token, swap in the engine command)
is the starting point. Each worker then listens on its node's address and on a port free there; a
multi-node instance's `--dist-init-addr` names its rank 0's node; a PD prefill server gets a free bootstrap
port; the router's worker URLs, bootstrap ports, host and metrics listener follow. Only values change, and
every final argv is validated again against the version's catalogue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from plugins.runners.local.binds import PROMETHEUS_HOST
from plugins.runners.local.failures import RoundFailure
from plugins.runners.local.launch import LaunchSpec
from plugins.runners.local.ports import BOOTSTRAP_FLAG
from service import PlacedWorker, RenderedLaunch, RunnerSettings, Scenario, validate_argv

USE_RAY = "--use-ray"


@dataclass(frozen=True)
class Endpoint:
    """Where one worker process listens: its node's address, its HTTP port, and its PD bootstrap port."""

    ip: str
    port: int
    bootstrap: int | None = None
    dist_port: int | None = None


def set_flag(argv: Sequence[str], flag: str, value: str) -> list[str]:
    """`argv` with the value after `flag` replaced (appended when the flag is absent)."""
    out = list(argv)
    if flag in out[:-1]:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def uses_ray(spec: LaunchSpec) -> bool:
    """Whether SGLang places this server's schedulers itself (`--use-ray`)."""
    return USE_RAY in spec.argv


def _check(flags: list[str], module: str, scenario: Scenario, settings: RunnerSettings, what: str,
           rendered: RenderedLaunch | None = None) -> None:
    router = rendered.router if rendered is not None else None
    argv = ["python", "-m", module, *flags]
    issues = (validate_argv(argv, package=router.package, router_version=router.version, allow=settings.allow_flags)
              if router is not None else
              validate_argv(argv, sglang_version=scenario.sglang_version, allow=settings.allow_flags))
    blocking = [str(issue) for issue in issues if issue.severity == "error"]
    if blocking:
        raise RoundFailure("validation", "validate", f"refusing to launch {what}: {'; '.join(blocking[:5])}")


def place_argv(specs: list[LaunchSpec], placed: list[PlacedWorker], rendered: RenderedLaunch,
               endpoints: list[Endpoint], router_at: Endpoint | None, metrics_port: int | None,
               scenario: Scenario, settings: RunnerSettings) -> list[LaunchSpec]:
    """The launch specs with the chosen addresses (workers in `placed` order, then the router)."""
    workers = [spec for spec in specs if spec.kind == "worker"]
    urls: dict[str, str] = {}
    bootstraps: dict[str, str] = {}
    dist: dict[tuple[str, int], str] = {}
    for worker, end in zip(placed, endpoints, strict=True):
        if worker.node_rank == 0 and end.dist_port is not None:
            dist[(worker.group, worker.replica)] = f"{end.ip}:{end.dist_port}"
    out: list[LaunchSpec] = []
    for spec, worker, end, shown in zip(workers, placed, endpoints, rendered.workers, strict=True):
        head = len(spec.argv) - (len(shown.argv) - 3)
        flags = set_flag(set_flag(spec.argv[head:], "--host", end.ip), "--port", str(end.port))
        if BOOTSTRAP_FLAG in flags and end.bootstrap is not None:
            bootstraps[spec.url] = str(end.bootstrap)
            flags = set_flag(flags, BOOTSTRAP_FLAG, str(end.bootstrap))
        if "--dist-init-addr" in flags:
            flags = set_flag(flags, "--dist-init-addr", dist[(worker.group, worker.replica)])
        _check(flags, "sglang.launch_server", scenario, settings, spec.name)
        url = f"http://{end.ip}:{end.port}" if spec.url else ""
        if spec.url:
            urls[spec.url] = url
        out.append(replace(spec, argv=spec.argv[:head] + flags, url=url, host=end.ip, port=end.port))
    router = next((spec for spec in specs if spec.kind == "router"), None)
    if router is not None and router_at is not None and rendered.router is not None:
        out.append(_router(router, rendered, router_at, metrics_port, urls, bootstraps, scenario, settings))
    return out


def _router(spec: LaunchSpec, rendered: RenderedLaunch, at: Endpoint, metrics_port: int | None,
            urls: dict[str, str], bootstraps: dict[str, str], scenario: Scenario,
            settings: RunnerSettings) -> LaunchSpec:
    assert rendered.router is not None
    shown = rendered.router.argv
    head = len(spec.argv) - (len(shown) - 3) - (0 if PROMETHEUS_HOST in shown else 2)
    flags = list(spec.argv[head:])
    for index, token in enumerate(list(flags)):
        if token in urls:
            if index > 0 and flags[index - 1] == "--prefill" and index + 1 < len(flags) \
                    and flags[index + 1].isdigit() and token in bootstraps:
                flags[index + 1] = bootstraps[token]
            flags[index] = urls[token]
    flags = set_flag(set_flag(flags, "--host", at.ip), "--port", str(at.port))
    flags = set_flag(flags, PROMETHEUS_HOST, at.ip)
    if metrics_port is not None:
        flags = set_flag(flags, "--prometheus-port", str(metrics_port))
    _check(flags, shown[2], scenario, settings, "the router", rendered)
    return replace(spec, argv=spec.argv[:head] + flags, url=f"http://{at.ip}:{at.port}", host=at.ip, port=at.port)
