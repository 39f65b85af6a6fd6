"""What a round launches: rendered argv, checked again token by token, with the configured engine command.

The renderer spells `python -m sglang.launch_server ...` (and `python -m sglang_router.launch_router ...`);
each argv is validated once more right here, just before launch, against the version's catalogue and the
operator's allowed dangerous flags. Only then is the `python -m <module>` head swapped for the configured
command: real SGLang, or the emulator, which takes exactly the same flags.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from plugins.runners.local.binds import PROMETHEUS_HOST, metrics_host
from plugins.runners.local.failures import RoundFailure
from service import (
    RenderedLaunch,
    RenderRefused,
    RunnerSettings,
    Scenario,
    ValidationIssue,
    get_logger,
    render_scenario,
    validate_argv,
)

log = get_logger(__name__)

EMULATOR_ENV = "SGLANG_TUNER_EMULATOR_"


@dataclass(frozen=True)
class LaunchSpec:
    """One process to start: final argv, extra environment, and the URL it serves."""

    name: str
    kind: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    host: str = "127.0.0.1"
    port: int = 0


def engine_of(settings: RunnerSettings) -> str:
    """`sglang` or `emulator`: the settings' choice, `auto` meaning sglang when it is importable."""
    if settings.engine != "auto":
        return settings.engine
    if importlib.util.find_spec("sglang") is not None:
        return "sglang"
    # Loud on purpose: on a GPU host this usually means sglang is missing from the environment, and every
    # figure of the round will be emulated (its provenance says so) rather than measured.
    log.warning("engine_auto_fell_back_to_emulator",
                detail="sglang is not importable: the local runner launches the emulator; set engine = "
                       "'sglang' to fail instead, or 'emulator' to silence this")
    return "emulator"


def _head(settings: RunnerSettings, engine: str) -> list[str]:
    if settings.engine_command:
        return list(settings.engine_command)
    module = "service.emulator" if engine == "emulator" else "sglang.launch_server"
    return [settings.python, "-m", module]


def _refuse(issues: list[ValidationIssue], what: str) -> RoundFailure:
    blocking = [issue for issue in issues if issue.severity == "error"]
    detail = "; ".join(str(issue) for issue in blocking[:5])
    return RoundFailure("validation", "validate", f"refusing to launch {what}: {detail}")


def _checked(argv: list[str], scenario: Scenario, settings: RunnerSettings, *, what: str,
             router: RenderedLaunch | None = None) -> list[str]:
    head = router.router if router is not None else None
    issues = (validate_argv(argv, package=head.package, router_version=head.version, allow=settings.allow_flags)
              if head is not None else
              validate_argv(argv, sglang_version=scenario.sglang_version, allow=settings.allow_flags))
    if any(issue.severity == "error" for issue in issues):
        raise _refuse(issues, what)
    return argv[3:]  # the flags after `python -m <module>`


def emulator_env(scenario: Scenario, settings: RunnerSettings, cost_model: str | None, *, first: bool) -> dict[str, str]:
    """Emulator settings for one worker (the fault goes to the first worker only)."""
    env = {EMULATOR_ENV + "VERSION": scenario.sglang_version,
           EMULATOR_ENV + "GPU": settings.emulator_gpu or scenario.hardware.gpu,
           EMULATOR_ENV + "TIME_SCALE": repr(settings.time_scale),
           EMULATOR_ENV + "COST_MODEL": cost_model or "roofline",
           EMULATOR_ENV + "DRAFT_ACCEPTANCE": repr(scenario.workload.speculative.acceptance),
           EMULATOR_ENV + "JSON_FAILURE_RATE": repr(scenario.workload.structured_output.prompt_only_failure_rate)}
    if first and settings.emulator_fault:
        env[EMULATOR_ENV + "FAULT"] = settings.emulator_fault
    return env


def plan_launch(scenario: Scenario, settings: RunnerSettings, *, cost_model: str | None = None
                ) -> tuple[RenderedLaunch, list[LaunchSpec]]:
    """Render, re-validate and turn a scenario into the processes to start (workers first, router last).

    Raises:
        RoundFailure: `validation` when rendering or the final argv check refuses; `engine_missing` /
            `router_missing` when the command to run is not installed.
    """
    try:
        rendered = render_scenario(scenario, allow=settings.allow_flags, python=settings.python)
    except RenderRefused as exc:
        raise _refuse(exc.issues, "the deployment") from None
    engine = engine_of(settings)
    if engine == "sglang" and not settings.engine_command and importlib.util.find_spec("sglang") is None:
        raise RoundFailure("engine_missing", "validate", "sglang is not installed here; install it, or set the "
                                                         "runner engine to `emulator`")
    head = _head(settings, engine)
    specs = []
    for index, worker in enumerate(rendered.workers):
        name = f"{worker.group}-{worker.replica}" + (f"-rank{worker.node_rank}" if worker.node_rank else "")
        flags = _checked(worker.argv, scenario, settings, what=name)
        env = dict(worker.env) | (emulator_env(scenario, settings, cost_model, first=index == 0)
                                  if engine == "emulator" else {})
        url = worker.url if worker.node_rank == 0 else ""  # only rank 0 of a multi-node server serves HTTP
        specs.append(LaunchSpec(name=name, kind="worker", argv=head + flags, env=env, url=url, host=worker.host,
                                port=worker.port))
    if rendered.router is not None:
        specs.append(_router_spec(rendered, scenario, settings))
    return rendered, specs


def smg_python(settings: RunnerSettings) -> str | None:
    """The interpreter that runs `python -m smg.launch_router`, or None when smg is installed nowhere we look.

    sglang-router 0.3.2 installs console scripts named `smg` too, so smg lives in a virtualenv of its own:
    the settings' `smg_python`, else `smg/bin/python` inside this interpreter's virtualenv (`make
    install-test`), else this interpreter when it can import smg.
    """
    if settings.smg_python:
        return settings.smg_python
    nested = Path(sys.prefix) / "smg" / "bin" / "python"
    if nested.exists():
        return str(nested)
    return settings.python if importlib.util.find_spec("smg") is not None else None


def _router_head(rendered: RenderedLaunch, settings: RunnerSettings) -> list[str]:
    router = rendered.router
    assert router is not None
    if settings.router_command:
        return list(settings.router_command)
    module = router.argv[2]  # the rendered `python -m <module>` of the router package
    if router.package == "smg":
        python = smg_python(settings)
        if python is None:
            raise RoundFailure("router_missing", "validate", "the deployment's router is smg, which is not "
                                                             "installed (make install-test puts it in .venv/smg; or "
                                                             "set the runner setting smg_python)")
        return [python, "-m", module]
    if importlib.util.find_spec("sglang_router") is None:
        raise RoundFailure("router_missing", "validate", "the deployment has a router but sglang-router is not "
                                                         "installed (pip install sglang-router)")
    return [settings.python, "-m", module]


def _router_spec(rendered: RenderedLaunch, scenario: Scenario, settings: RunnerSettings) -> LaunchSpec:
    router = rendered.router
    assert router is not None
    head = _router_head(rendered, settings)
    argv = list(router.argv)
    if PROMETHEUS_HOST not in argv:  # the router's own default is every interface
        argv += [PROMETHEUS_HOST, metrics_host(scenario)]
    flags = _checked(argv, scenario, settings, router=rendered, what="the router")
    return LaunchSpec(name="router", kind="router", argv=head + flags, url=router.url, host=router.host,
                      port=router.port)


def process_env(spec: LaunchSpec) -> dict[str, str]:
    """The environment a process starts with: this one's, plus the spec's (CUDA_VISIBLE_DEVICES, emulator)."""
    return {**os.environ, **spec.env}
