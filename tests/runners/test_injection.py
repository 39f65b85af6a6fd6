"""Nothing unsafe reaches a process launch: the launcher never sees a refused argv."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec
import pytest

from plugins.runners.local import LocalRunner, RoundFailure, ServerProcess
from service.components import RoundContext
from service.domain import RoundStatus, Scenario

from .conftest import settings, single_worker


class RefusingLauncher:
    """Records what it is asked to start and starts nothing."""

    def __init__(self) -> None:
        self.argv: list[list[str]] = []

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ServerProcess:
        self.argv.append(list(argv))
        raise RoundFailure("launch_exit", "start", "recorded only")


def _with_extra(extra: dict[str, object]) -> Scenario:
    base = single_worker()
    group = base.deployment.groups[0]
    server = msgspec.structs.replace(group.server, extra=extra)
    groups = [msgspec.structs.replace(group, server=server)]
    return msgspec.structs.replace(base, deployment=msgspec.structs.replace(base.deployment, groups=groups))


def _run(scenario: Scenario, **overrides: object) -> tuple[LocalRunner, RefusingLauncher, object]:
    launcher = RefusingLauncher()
    runner = LocalRunner(launcher=launcher)
    result = asyncio.run(runner.run_round(scenario, context=RoundContext(settings=settings(**overrides))))
    return runner, launcher, result


@pytest.mark.parametrize("extra", [
    {"--served-model-name": "m; rm -rf /"},
    {"--served-model-name": "m\n--trust-remote-code"},
    {"--served-model-name": "--trust-remote-code"},
    {"--served-model-name": "$(touch /tmp/owned)"},
    {"--trust-rem": True},
    {"--trust-remote-code": True},
    {"--config": "/etc/passwd"},
    {"--forward-hooks": "x"},
    {"--delete-ckpt-after-loading": True},
    {"--tool-server": "http://example.com"},
    {"--enable-custom-logit-processor": True},
])
def test_refused_values_and_flags_never_reach_a_launch(extra: dict[str, object]) -> None:
    _, launcher, result = _run(_with_extra(extra))
    assert launcher.argv == []
    assert result.status is RoundStatus.FAILED  # type: ignore[attr-defined]
    assert result.error.startswith("validation:") and result.error_phase == "validate"  # type: ignore[attr-defined]


def test_a_smuggled_model_path_never_reaches_a_launch() -> None:
    scenario = msgspec.structs.replace(single_worker(), model="Qwen/Qwen3.6-27B --trust-remote-code")
    _, launcher, result = _run(scenario)
    assert launcher.argv == [] and result.error_phase == "validate"  # type: ignore[attr-defined]


def test_a_dangerous_flag_the_operator_allows_is_launched_exactly() -> None:
    _, launcher, _ = _run(_with_extra({"--trust-remote-code": True}), allow_flags=["--trust-remote-code"])
    assert len(launcher.argv) == 1
    argv = launcher.argv[0]
    assert argv[1:3] == ["-m", "service.emulator"]
    assert "--trust-remote-code" in argv and all("\n" not in token for token in argv)


def test_the_engine_command_replaces_only_the_module_head() -> None:
    _, launcher, _ = _run(single_worker(), engine_command=["/opt/sglang/bin/python", "-m", "sglang.launch_server"])
    argv = launcher.argv[0]
    assert argv[:3] == ["/opt/sglang/bin/python", "-m", "sglang.launch_server"]
    assert argv[3:5] == ["--model-path", "Qwen/Qwen3.6-27B"]
