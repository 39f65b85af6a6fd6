"""Runner settings: what an operator allows the `local` and `attach` runners to do on this host.

Settings come from a TOML file named by `SGLANG_TUNER_RUNNER_SETTINGS` (a `[runner]` table), then from
`SGLANG_TUNER_RUNNER_*` environment variables, then from a round context's `settings` mapping; each layer
overrides the one before. Nothing is cached at import: every round reads them afresh.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

SETTINGS_FILE_ENV = "SGLANG_TUNER_RUNNER_SETTINGS"
ENV_PREFIX = "SGLANG_TUNER_RUNNER_"

Engine = Literal["auto", "sglang", "emulator"]
Bench = Literal["builtin", "sglang"]


class PhaseDeadlines(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Seconds each launch phase may take before the round fails naming that phase.

    Attributes:
        start: From spawning the processes until every HTTP port accepts connections.
        health: Until `/health` answers 200 on every worker and the router.
        warm_prompts: The workload's requests a live service would already have served (`bench.warm_prompts`),
            sent before bench_serving's warm-up; sized like a load phase, since they can be as many.
        warmup: The warm-up requests.
        load: The measured load.
        stall: The longest the load may go without any token while requests are outstanding (a dead
            scheduler behind a `/health` that still answers 200).
        teardown: SIGTERM to the whole process group, then SIGKILL after this grace period.
        placement: The `ray` runner: how long a round waits for its placement group while the cluster is
            busy with other rounds.
    """

    start: float = 600.0
    health: float = 900.0
    warmup: float = 300.0
    warm_prompts: float = 3600.0
    load: float = 3600.0
    stall: float = 300.0
    teardown: float = 10.0
    placement: float = 600.0


class RunnerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the real runners may launch and reach.

    Attributes:
        allow_flags: Dangerous launch flags (or `--flag=value` pairs) the operator enables, each by name
            (see docs/flags.md, "Safety policy"); everything else dangerous is refused at launch.
        attach_allowlist: Regular expressions; the `attach` runner measures only URLs that fully match one.
        attach_url: The endpoint the `attach` runner measures (default: the deployment's router URL, else
            its first worker's).
        engine: Which server the `local` runner starts: `sglang` (`python -m sglang.launch_server`),
            `emulator` (`python -m service.emulator`, the GPU-free stand-in that takes the same argv),
            or `auto` (sglang when it is importable, else the emulator).
        engine_command: Overrides the command that replaces `python -m sglang.launch_server` (argv list).
        router_command: Overrides the command that replaces `python -m sglang_router.launch_router` (or
            `python -m smg.launch_router` for a deployment whose router package is `smg`).
        smg_python: Interpreter with the `smg` package, for a deployment whose router package is `smg`
            (default: `smg/bin/python` inside this interpreter's virtualenv, where `make install-test` puts
            it, else `python` when it can import `smg`).
        bench: `builtin` (the project's bench_serving-compatible load generator) or `sglang` (run
            `python -m sglang.bench_serving` itself; needs sglang installed).
        python: Interpreter for the default engine and router commands.
        deadlines: Per-phase deadlines.
        log_dir: Where server and router logs go (a fresh temporary folder per round when empty).
        time_scale: Emulator only: wall seconds per emulated second (0.25 runs four times faster than
            a GPU would); the runner divides measured times by it, so figures read as on the GPU.
        emulator_gpu: Emulator only: the GPU whose cost model times the steps (default: the scenario's).
        emulator_fault: Emulator only: a fault to inject (see docs/runners.md).
        remap_ports: Place every listener on a free loopback port instead of the deployment's own.
        retraction_storm_per_request: A round fails as a retraction storm when retractions exceed this many
            per completed request.
        state_dir: Where the `local` runner records the processes of each round before it launches them, so
            that the next round ends what a dead owner left behind (default: `$XDG_STATE_HOME/sglang-tuner/
            processes`, else `~/.local/state/sglang-tuner/processes`).
        allow_wildcard_bind: Let a round listen on every interface (`0.0.0.0` or `::` as `router.host`, the
            router's `--prometheus-host` or a node host); refused otherwise, and warned about in the round's
            notes when allowed.
        ray_address: The `ray` runner's cluster: `ray://head:10001`, `auto`, or `local` (a throwaway cluster
            on this host with fake GPU nodes sized for the scenario); empty means `RAY_ADDRESS`, else `local`.
        ray_local_nodes: Nodes of the `local` throwaway cluster (0: the scenario's `hardware.nodes`).
        hybrid_measure: The runner the `hybrid` runner measures with: `local`, `attach` or `ray`.
        hybrid_top_k: Of a step's candidates a calibrated prediction says the policy keeps even at the
            pessimistic end of its uncertainty, how many the `hybrid` runner measures (best predicted first).
    """

    allow_flags: list[str] = msgspec.field(default_factory=list)
    attach_allowlist: list[str] = msgspec.field(default_factory=list)
    attach_url: str | None = None
    engine: Engine = "auto"
    engine_command: list[str] | None = None
    router_command: list[str] | None = None
    smg_python: str = ""
    bench: Bench = "builtin"
    python: str = sys.executable
    deadlines: PhaseDeadlines = PhaseDeadlines()
    log_dir: str = ""
    time_scale: float = 1.0
    emulator_gpu: str | None = None
    emulator_fault: str | None = None
    remap_ports: bool = False
    retraction_storm_per_request: float = 1.0
    state_dir: str = ""
    allow_wildcard_bind: bool = False
    ray_address: str = ""
    ray_local_nodes: int = 0
    hybrid_measure: Literal["local", "attach", "ray"] = "local"
    hybrid_top_k: Annotated[int, msgspec.Meta(ge=1)] = 1

    def url_allowed(self, url: str) -> bool:
        """Whether the attach allowlist admits `url` (a full match of one pattern)."""
        return any(re.fullmatch(pattern, url) for pattern in self.attach_allowlist)


_LIST_FIELDS = {"allow_flags", "attach_allowlist", "engine_command", "router_command"}
_BOOL_WORDS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _from_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    """`SGLANG_TUNER_RUNNER_<FIELD>` variables; lists are comma separated (commands: space separated)."""
    values: dict[str, Any] = {}
    deadlines: dict[str, float] = {}
    for field in RunnerSettings.__struct_fields__:
        raw = environ.get(ENV_PREFIX + field.upper())
        if raw is None or field == "deadlines":
            continue
        if field in ("engine_command", "router_command"):
            values[field] = raw.split()
        elif field in _LIST_FIELDS:
            values[field] = [part.strip() for part in raw.split(",") if part.strip()]
        elif field in ("remap_ports", "allow_wildcard_bind"):
            values[field] = _BOOL_WORDS.get(raw.strip().lower(), False)
        elif field in ("time_scale", "retraction_storm_per_request"):
            values[field] = float(raw)
        elif field in ("ray_local_nodes", "hybrid_top_k"):
            values[field] = int(raw)
        else:
            values[field] = raw
    for phase in PhaseDeadlines.__struct_fields__:
        raw = environ.get(f"{ENV_PREFIX}DEADLINE_{phase.upper()}")
        if raw is not None:
            deadlines[phase] = float(raw)
    if deadlines:
        values["deadlines"] = deadlines
    return values


def load_runner_settings(overrides: Mapping[str, object] | None = None,
                         environ: Mapping[str, str] | None = None) -> RunnerSettings:
    """Settings from the settings file, the environment and `overrides`, in that order.

    Raises:
        msgspec.ValidationError: A value has the wrong type or an unknown name.
    """
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    path = environ.get(SETTINGS_FILE_ENV)
    layers: list[Mapping[str, Any]] = []
    if path:
        layers.append(msgspec.toml.decode(Path(path).read_bytes()).get("runner", {}))
    layers += [_from_environ(environ), dict(overrides or {})]
    for layer in layers:
        for key, value in layer.items():
            if key == "deadlines":
                given = msgspec.structs.asdict(value) if isinstance(value, PhaseDeadlines) else dict(value)
                merged["deadlines"] = {**merged.get("deadlines", {}), **given}
            else:
                merged[key] = value
    return msgspec.convert(merged, type=RunnerSettings)


__all__ = ["PhaseDeadlines", "RunnerSettings", "load_runner_settings"]
