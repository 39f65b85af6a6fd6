"""Launch commands for the final deployment: argv lists (never shell strings) for every worker and the router.

The version-aware renderer in `service.sglang` is used when it is installed in this tree; otherwise a
plain rendering of the typed settings is produced (every non-default setting as its SGLang flag).
"""

from __future__ import annotations

import importlib
from typing import Any

import msgspec

from service.domain import Deployment, Hardware, PlacedWorker, RouterConfig, ServerConfig, place_workers

_SERVER_DEFAULTS = msgspec.to_builtins(ServerConfig())
# Typed names whose SGLang flag is spelled differently from the field.
_SPELLING = {"attention_dp_size": "--dp-size"}


class LaunchCommand(msgspec.Struct, frozen=True, kw_only=True):
    """One process to start: where, with which environment, and its exact argv."""

    name: str
    host: str
    env: dict[str, str]
    argv: list[str]


def render_launch(deployment: Deployment, hardware: Hardware, version: str,
                  model: str = "") -> tuple[list[LaunchCommand], LaunchCommand | None]:
    """Worker commands and the router command (None for a single worker without a router).

    Workers without their own `model_path` serve the scenario's `model`.
    """
    if model:
        groups = [g if g.server.model_path else msgspec.structs.replace(
            g, server=msgspec.structs.replace(g.server, model_path=model)) for g in deployment.groups]
        deployment = msgspec.structs.replace(deployment, groups=groups)
    rendered = _render_with_catalogue(deployment, hardware, version, model)
    if rendered is not None:
        return rendered
    workers = place_workers(deployment, hardware)
    commands = [_worker_command(w) for w in workers]
    return commands, _router_command(deployment.router, workers)


def _render_with_catalogue(deployment: Deployment, hardware: Hardware, version: str,
                           model: str) -> tuple[list[LaunchCommand], LaunchCommand | None] | None:
    try:
        module: Any = importlib.import_module("service.sglang.render")
        rendered = module.render_launch(deployment, hardware, model=model, sglang_version=version)
    except (ImportError, AttributeError):
        return None
    workers = [LaunchCommand(name=f"{w.group}-{w.replica}" + (f"-rank{w.node_rank}" if w.node_rank else ""),
                             host=str(w.host), env=dict(w.env), argv=list(w.argv)) for w in rendered.workers]
    router = rendered.router
    return workers, None if router is None else LaunchCommand(name="router", host=str(router.host), env={},
                                                               argv=list(router.argv))


def _worker_command(worker: PlacedWorker) -> LaunchCommand:
    argv = ["python", "-m", "sglang.launch_server"]
    settings = msgspec.to_builtins(worker.server)
    for key, value in settings.items():
        if key in ("extra", "attention-dp-size") or value == _SERVER_DEFAULTS.get(key):
            continue
        argv += _flag(f"--{key}", value)
    if worker.server.attention_dp_size > 1:
        argv += ["--enable-dp-attention", *_flag(_SPELLING["attention_dp_size"], worker.server.attention_dp_size)]
    for key, value in worker.server.extra.items():
        argv += _flag(key, value)
    if worker.role != "unified":
        argv += ["--disaggregation-mode", worker.role]
        if worker.bootstrap_port is not None and worker.role == "prefill":
            argv += ["--disaggregation-bootstrap-port", str(worker.bootstrap_port)]
    if worker.nnodes > 1:
        argv += ["--nnodes", str(worker.nnodes), "--node-rank", str(worker.node_rank),
                 "--dist-init-addr", str(worker.dist_init_addr)]
    argv += ["--host", "0.0.0.0" if worker.host != "127.0.0.1" else "127.0.0.1", "--port", str(worker.port)]
    name = f"{worker.group}-{worker.replica}" + (f"-rank{worker.node_rank}" if worker.nnodes > 1 else "")
    return LaunchCommand(name=name, host=worker.host, env={"CUDA_VISIBLE_DEVICES": ",".join(map(str, worker.gpus))},
                         argv=argv)


def _flag(flag: str, value: Any) -> list[str]:
    if isinstance(value, bool):
        return [flag] if value else []
    if isinstance(value, list):
        return [flag, *map(str, value)]
    return [flag, str(value)]


def _router_command(router: RouterConfig | None, workers: list[PlacedWorker]) -> LaunchCommand | None:
    if router is None:
        return None
    leaders = [w for w in workers if w.node_rank == 0]
    module = "smg.launch_router" if router.package == "smg" else "sglang_router.launch_router"
    argv = ["python", "-m", module]
    if any(w.role != "unified" for w in leaders):
        argv.append("--pd-disaggregation")
        for w in leaders:
            if w.role == "prefill":
                argv += ["--prefill", w.url, *([str(w.bootstrap_port)] if w.bootstrap_port else [])]
            elif w.role == "decode":
                argv += ["--decode", w.url]
        argv += ["--prefill-policy", router.prefill_policy or router.policy,
                 "--decode-policy", router.decode_policy or router.policy]
    else:
        argv += ["--worker-urls", *[w.url for w in leaders], "--policy", router.policy]
    for name in ("cache_threshold", "balance_abs_threshold", "balance_rel_threshold", "prometheus_port"):
        value = getattr(router, name)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    for key, value in router.extra.items():
        argv += _flag(key, value)
    argv += ["--host", router.host, "--port", str(router.port)]
    return LaunchCommand(name="router", host=router.host, env={}, argv=argv)
