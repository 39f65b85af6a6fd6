"""Shared pieces of the runner tests: small emulated scenarios on free ports, recording launchers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from plugins.runners.local import ServerProcess, SubprocessLauncher
from service.domain import BenchSpec, LengthDist, PrefixStructure, Scenario, WorkloadProfile
from service.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "emulated"
# Fast rounds: emulated time runs twice as fast as the GPU it stands for, deadlines sized for this machine.
FAST = {"engine": "emulator", "time_scale": 0.5, "remap_ports": True,
        "deadlines": {"start": 30.0, "health": 30.0, "warmup": 30.0, "load": 60.0, "stall": 2.0, "teardown": 3.0}}


CLI = [sys.executable, "-c", "from service.cli import main; main()"]
# `sglang-tuner round` as CI runs it: the emulator, listeners on free loopback ports, emulated time twice as
# fast as the GPU's.
CLI_ENV = {"SGLANG_TUNER_RUNNER_ENGINE": "emulator", "SGLANG_TUNER_RUNNER_REMAP_PORTS": "1",
           "SGLANG_TUNER_RUNNER_TIME_SCALE": "0.5"}


def cli_round(example: str, *extra: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`sglang-tuner round examples/emulated/EXAMPLE --json EXTRA...` in a process of its own (CLI_ENV and
    `env` over this process's environment): its JSON result."""
    done = subprocess.run([*CLI, "--log-level", "warning", "round", str(EXAMPLES / example), "--json", *extra],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, **CLI_ENV, **(env or {})})
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def settings(**overrides: Any) -> dict[str, Any]:
    """Runner settings for a test round (a RoundContext.settings mapping)."""
    merged = dict(FAST)
    for key, value in overrides.items():
        if key == "deadlines":
            merged["deadlines"] = {**FAST["deadlines"], **value}  # type: ignore[dict-item]
        else:
            merged[key] = value
    return merged


def single_worker(num_prompts: int = 16, concurrency: int = 4, input_len: int = 200, output_len: int = 32) -> Scenario:
    """One emulated Qwen3.6-27B worker, no router, a short shared-prefix load."""
    base = load_scenario(EXAMPLES / "two-workers-round-robin.toml")
    group = msgspec.structs.replace(base.deployment.groups[0], replicas=1)
    workload = WorkloadProfile(name="short", input=LengthDist(median=input_len, kind="fixed"),
                               output=LengthDist(median=output_len, kind="fixed"),
                               prefix=PrefixStructure(system_prompt_tokens=64))
    return msgspec.structs.replace(
        base, name="single-worker", deployment=msgspec.structs.replace(base.deployment, groups=[group], router=None),
        workload=workload, bench=BenchSpec(num_prompts=num_prompts, max_concurrency=concurrency, warmup_requests=1))


class RecordingLauncher(SubprocessLauncher):
    """Launches for real and remembers every process, so a test can check its process group afterwards."""

    def __init__(self) -> None:
        self.processes: list[ServerProcess] = []

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> ServerProcess:
        process = super().spawn(name, argv, env, log_path)
        self.processes.append(process)
        return process


@pytest.fixture
def launcher() -> RecordingLauncher:
    return RecordingLauncher()
