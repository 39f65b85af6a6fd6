"""Render a deployment into exact launch argv lists: one per placed worker, one for the router.

Argv lists only, never a shell string. Rendering validates first and refuses (raises `RenderRefused`
with every issue) when anything is wrong; then every rendered argv is checked again, token by token,
against the version's catalogue, so nothing outside it reaches a launch.
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from service.domain import Deployment, Hardware, PlacedWorker, RouterConfig, Scenario, place_workers
from service.domain.deployment import Role
from service.sglang.flags import FlagCatalogue, RouterPackage, load_catalogue, router_catalogue
from service.sglang.router import ROUTER_MODULES
from service.sglang.spelling import typed_flags
from service.sglang.validate import validate_argv, validate_deployment
from service.sglang.values import ValidationIssue, errors, flag_tokens, format_value

SERVER_MODULE = "sglang.launch_server"
ROUTER_MODULE = ROUTER_MODULES["sglang-router"]
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})


class RenderedWorker(msgspec.Struct, frozen=True, kw_only=True):
    """One `python -m sglang.launch_server` process: where it runs and exactly how it starts."""

    group: str
    replica: int
    role: Role
    host: str
    node_rank: int
    port: int
    url: str
    env: dict[str, str]
    argv: list[str]


class RenderedRouter(msgspec.Struct, frozen=True, kw_only=True):
    """The router process in front of the workers (`python -m sglang_router.launch_router` or `smg.launch_router`)."""

    host: str
    port: int
    url: str
    argv: list[str]
    package: RouterPackage = "sglang-router"
    version: str = ""


class RenderedLaunch(msgspec.Struct, frozen=True, kw_only=True):
    """Every process of a deployment for one SGLang version, plus warnings that did not block it."""

    sglang_version: str
    workers: list[RenderedWorker]
    router: RenderedRouter | None = None
    warnings: list[ValidationIssue] = msgspec.field(default_factory=list)


class RenderRefused(ValueError):
    """Validation found errors; `issues` lists them all (errors and warnings)."""

    def __init__(self, issues: list[ValidationIssue]) -> None:
        self.issues = issues
        lines = "\n".join(f"  - {issue}" for issue in errors(issues))
        super().__init__(f"refusing to render: {len(errors(issues))} problem(s)\n{lines}")


def render_scenario(scenario: Scenario, *, sglang_version: str | None = None, allow: Collection[str] = (),
                    python: str = "python") -> RenderedLaunch:
    """Render a scenario's deployment for `sglang_version` (default: the scenario's own)."""
    return render_launch(scenario.deployment, scenario.hardware, model=scenario.model,
                         sglang_version=sglang_version or scenario.sglang_version, allow=allow, python=python)


def render_launch(deployment: Deployment, hardware: Hardware, *, model: str, sglang_version: str,
                  allow: Collection[str] = (), python: str = "python") -> RenderedLaunch:
    """Exact argv lists for every worker and the router.

    Args:
        deployment: Worker groups and router.
        hardware: The cluster (GPUs per node, node hosts).
        model: Model path or Hugging Face id, used where a group sets no server.model-path.
        sglang_version: Target version; flags are spelled for it.
        allow: Dangerous flags (or "--flag=value" pairs) the operator has enabled.
        python: The interpreter argv[0] names.

    Raises:
        RenderRefused: Validation found errors; nothing is rendered.
    """
    issues = validate_deployment(deployment, hardware, sglang_version=sglang_version, model=model, allow=allow)
    if errors(issues):
        raise RenderRefused(issues)
    catalogue = load_catalogue(sglang_version)
    workers = [_render_worker(worker, catalogue, model, python) for worker in place_workers(deployment, hardware)]
    router = None
    if deployment.router is not None:
        router = _render_router(deployment.router, workers, hardware, python)
    final = [issue for worker in workers
             for issue in validate_argv(worker.argv, sglang_version=sglang_version, allow=allow)]
    if router is not None and deployment.router is not None:
        final += validate_argv(router.argv, package=deployment.router.package, router_version=router.version,
                               allow=allow)
    if errors(final):
        raise RenderRefused(final)
    return RenderedLaunch(sglang_version=sglang_version, workers=workers, router=router, warnings=issues)


def _render_worker(worker: PlacedWorker, catalogue: FlagCatalogue, model: str, python: str) -> RenderedWorker:
    server = worker.server
    argv = [python, "-m", SERVER_MODULE, "--model-path", server.model_path or model,
            "--host", worker.host, "--port", str(worker.port)]
    if worker.nnodes > 1 and worker.dist_init_addr is not None:
        argv += ["--nnodes", str(worker.nnodes), "--node-rank", str(worker.node_rank),
                 "--dist-init-addr", worker.dist_init_addr]
    if worker.role != "unified":
        argv += ["--disaggregation-mode", worker.role]
        if worker.role == "prefill" and worker.bootstrap_port is not None:
            argv += ["--disaggregation-bootstrap-port", str(worker.bootstrap_port)]
    for typed in typed_flags(server, catalogue):
        spec = catalogue.get(typed.flag)
        if spec is not None:  # validation has already refused a flag the version lacks
            argv += flag_tokens(spec, typed.flag, typed.value)
    for spelling, value in server.extra.items():
        spec = catalogue.get(spelling)
        if spec is not None:
            argv += flag_tokens(spec, spelling, value)
    return RenderedWorker(group=worker.group, replica=worker.replica, role=worker.role, host=worker.host,
                          node_rank=worker.node_rank, port=worker.port, url=worker.url,
                          env={"CUDA_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in worker.gpus)}, argv=argv)


def _render_router(router: RouterConfig, workers: list[RenderedWorker], hardware: Hardware,
                   python: str) -> RenderedRouter:
    # Only rank 0 of a multi-node server runs the HTTP server the router talks to.
    heads = [worker for worker in workers if worker.node_rank == 0]
    catalogue = router_catalogue(router.package, router.version)  # validation has refused an unknown version
    argv = [python, "-m", ROUTER_MODULES[router.package], "--host", router.host, "--port", str(router.port)]
    if any(worker.role != "unified" for worker in heads):
        argv.append("--pd-disaggregation")
        for worker in heads:
            if worker.role == "prefill":
                bootstrap = _bootstrap_port(worker)
                argv += ["--prefill", worker.url, *([bootstrap] if bootstrap else [])]
        for worker in heads:
            if worker.role == "decode":
                argv += ["--decode", worker.url]
    else:
        argv += ["--worker-urls", *(worker.url for worker in heads)]
    argv += ["--policy", router.policy]
    for flag, value in (("--prefill-policy", router.prefill_policy), ("--decode-policy", router.decode_policy),
                        ("--cache-threshold", router.cache_threshold),
                        ("--balance-abs-threshold", router.balance_abs_threshold),
                        ("--balance-rel-threshold", router.balance_rel_threshold),
                        ("--prometheus-port", router.prometheus_port)):
        if value is not None:
            argv += [flag, format_value(value)]
    for spelling, setting in router.extra.items():
        spec = catalogue.get(spelling)
        if spec is not None:
            argv += flag_tokens(spec, spelling, setting)
    host = hardware.host(0) if router.host in _WILDCARD_HOSTS else router.host
    return RenderedRouter(host=router.host, port=router.port, url=f"http://{host}:{router.port}", argv=argv,
                          package=router.package, version=catalogue.version)


def _bootstrap_port(worker: RenderedWorker) -> str | None:
    argv = worker.argv
    if "--disaggregation-bootstrap-port" in argv:
        return argv[argv.index("--disaggregation-bootstrap-port") + 1]
    return None
