"""Start an emulated SGLang server from `sglang.launch_server` argv: parse, log startup, serve.

Emulator-only settings come from the environment, so the argv stays exactly what SGLang would take:

| variable | meaning | default |
|---|---|---|
| `SGLANG_TUNER_EMULATOR_VERSION` | SGLang version whose flags and routes are emulated | 0.5.23 |
| `SGLANG_TUNER_EMULATOR_GPU` | GPU whose cost model times the steps | H100-SXM |
| `SGLANG_TUNER_EMULATOR_COST_MODEL` | cost model plugin that times the steps | roofline |
| `SGLANG_TUNER_EMULATOR_TIME_SCALE` | wall seconds per emulated second | 1.0 |
| `SGLANG_TUNER_EMULATOR_DRAFT_ACCEPTANCE` | per-token draft acceptance under speculative decoding | 0.75 |
| `SGLANG_TUNER_EMULATOR_JSON_FAILURE_RATE` | share of outputs a prompt that only asks for JSON gets wrong (no grammar) | 0.0374 |
| `SGLANG_TUNER_EMULATOR_FAULT` | a fault to inject (`service/emulator/faults.py`) | none |
| `SGLANG_TUNER_EMULATOR_PERTURB` | a hidden change of the step costs, `decode=1.4,prefill=1.8,step_ms=2` (factors of decode and prefill step times, fixed ms per step, ms per request of an extend batch): a stand-in for a real deployment's kernels, driver and host that no cost model knows, for testing calibration. The tuner never reads it, and nothing the server reports names it | none |
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from service.calibration import CorrectedStepCost, Factors
from service.components import CostModel, StepCostModel
from service.domain import Hardware, ModelSpec, resolve_model
from service.emulator.app import EmulatorApp
from service.emulator.args import ArgvError, ServerArgs, parse_server_argv
from service.emulator.engine import DEFAULT_DRAFT_ACCEPTANCE, EmulatedEngine
from service.emulator.faults import CUDA_GRAPH_LINES, FAULT_ENV, OOM_LINES, Fault, FaultSpecError, parse_fault
from service.emulator.json_output import DEFAULT_FAILURE_RATE
from service.emulator.nodes import node_layout, rendezvous
from service.plugin_host import PluginHost
from service.simulator import ServerStartError
from service.simulator.memory import HostMemoryShort, context_window

ENV = "SGLANG_TUNER_EMULATOR_"
DEFAULT_VERSION = "0.5.23"
# The scheduler and detokenizer of a real server are child processes; the emulator keeps one such child so
# a launcher that kills only the parent, not the process group, leaves it behind exactly as with SGLang.
_CHILD = "import time\nwhile True:\n    time.sleep(3600)\n"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def make_logger(tp_size: int) -> Callable[[str], None]:
    """SGLang's log format: `[%Y-%m-%d %H:%M:%S TP0] message` (rank suffix only with TP > 1)."""
    suffix = " TP0" if tp_size > 1 else ""

    def log(message: str) -> None:
        """Write one log line to stdout."""
        sys.stdout.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}{suffix}] {message}\n")
        sys.stdout.flush()

    return log


def _bind_cost(model: ModelSpec, hardware: Hardware, args: ServerArgs, name: str) -> StepCostModel:
    """The step cost model the scheduler is timed by (a cost-model plugin, as the simulator uses)."""
    models: dict[str, CostModel] = PluginHost(allow={"builtin_cost_models"}).components("cost_model")
    chosen = models.get(name) or models["roofline"]
    if not chosen.available():
        chosen = models["roofline"]
    return chosen.bind(model, hardware, args.server)


def parse_perturbation(text: str | None) -> Factors | None:
    """`decode=1.4,prefill=1.8,step_ms=2` as factors; None when unset.

    Raises:
        ValueError: A part is not `name=number` of a known name.
    """
    if not text or not text.strip():
        return None
    values: dict[str, float] = {}
    for part in text.split(","):
        name, sep, number = part.partition("=")
        name = name.strip()
        if not sep or name not in Factors.__struct_fields__:
            raise ValueError(f"{ENV}PERTURB: {part.strip()!r} is not one of "
                             f"{', '.join(Factors.__struct_fields__)} = a number")
        values[name] = float(number)
    return Factors(**values)


def _startup_lines(args: ServerArgs, engine: EmulatedEngine, model: ModelSpec, log: Callable[[str], None]) -> None:
    resolved = engine.resolved
    weights_gb = resolved.weights_per_gpu_bytes / 1024**3
    kv_gb = resolved.pool_tokens * resolved.kv_bytes_per_gpu_token / 1024**3
    log(f"Load weight end. type={model.architecture}, dtype=torch.bfloat16, "
        f"mem usage={weights_gb:.2f} GB.")
    log(f"KV Cache is allocated. #tokens: {resolved.pool_tokens}, KV size: {kv_gb:.2f} GB")
    log("Capture decode CUDA graph end. Time elapsed: 0.00 s. mem usage=0.00 GB.")
    log(f"max_total_num_tokens={resolved.pool_tokens}, chunked_prefill_size={resolved.chunked_prefill_size}, "
        f"max_prefill_tokens={resolved.max_prefill_tokens}, max_running_requests={resolved.max_running_requests}, "
        f"context_len={model.max_context}, available_gpu_mem=0.00 GB")


def _fail(log: Callable[[str], None], lines: tuple[str, ...] | list[str], code: int = 1) -> int:
    for line in lines:
        log(line)
    return code


def _die_with_parent(parent: int) -> Callable[[], None]:
    """A `preexec_fn`: SIGKILL the child when this server dies, as SGLang's scheduler and detokenizer do
    (`kill_itself_when_parent_died`, `prctl(PR_SET_PDEATHSIG, SIGKILL)`); exit at once if it already has."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the launcher's process-group kill still reaches the child
        prctl = None

    def arm() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm


def _spawn_child() -> subprocess.Popen[bytes]:
    # Same process group as this server (no new session): a launcher that signals the group reaches it.
    return subprocess.Popen([sys.executable, "-S", "-c", _CHILD], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_die_with_parent(os.getpid()))


def run_emulator(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    """Run an emulated server until it is stopped; returns the process exit code (2 for bad argv)."""
    environ = os.environ if environ is None else environ
    version = environ.get(ENV + "VERSION", DEFAULT_VERSION)
    try:
        args = parse_server_argv(argv, version)
        fault = parse_fault(environ.get(FAULT_ENV))
        perturbation = parse_perturbation(environ.get(ENV + "PERTURB"))
    except ArgvError as exc:
        sys.stderr.write(exc.usage_text() + "\n")
        return exc.exit_code
    except (FaultSpecError, LookupError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    log = make_logger(int(args.get("tp_size", 1) or 1))
    log(f"server_args=ServerArgs(model_path='{args.get('model_path')}', host='{args.host}', port={args.port}, "
        f"tp_size={args.get('tp_size', 1)}, version='{version}', emulated=True)")
    if fault is not None and fault.kind == "oom":
        return _fail(log, OOM_LINES)
    try:
        model = resolve_model(str(args.get("model_path")))
    except (KeyError, ValueError, OSError):
        return _fail(log, [f"OSError: {args.get('model_path')} is not a local folder and is not a valid model "
                           "identifier listed on 'https://huggingface.co/models'"])
    return _serve(args, model, fault, perturbation, log, environ)


def _serve(args: ServerArgs, model: ModelSpec, fault: Fault | None, perturbation: Factors | None,
           log: Callable[[str], None], environ: Mapping[str, str]) -> int:
    gpus = [g for g in environ.get("CUDA_VISIBLE_DEVICES", "0").split(",") if g.strip()]
    hardware = Hardware(gpu=environ.get(ENV + "GPU", "H100-SXM"), gpus_per_node=max(8, len(gpus)))
    try:
        cost = _bind_cost(model, hardware, args, environ.get(ENV + "COST_MODEL", "roofline"))
        if perturbation is not None:
            cost = CorrectedStepCost(cost, perturbation)
        engine = EmulatedEngine(
            args, model, hardware, cost, time_scale=float(environ.get(ENV + "TIME_SCALE", "1.0")), log=log,
            acceptance=float(environ.get(ENV + "DRAFT_ACCEPTANCE", DEFAULT_DRAFT_ACCEPTANCE)),
            pool_tokens=fault.n if fault is not None and fault.kind == "retraction_storm" else None,
            seed=int(args.get("random_seed") or 0))
    except HostMemoryShort as exc:  # the HiCache host pool's own check (`mem_cache/pool_host/base.py`)
        return _fail(log, [f"ValueError: {exc}"])
    except ServerStartError as exc:
        return _fail(log, [f"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. ({exc})"])
    child = _spawn_child()
    try:
        json_rate = float(environ.get(ENV + "JSON_FAILURE_RATE", DEFAULT_FAILURE_RATE))
        return _listen(args, model, engine, fault, log, json_failure_rate=json_rate)
    finally:
        child.terminate()  # SGLang's kill_process_tree on a normal exit


def _listen(args: ServerArgs, model: ModelSpec, engine: EmulatedEngine, fault: Fault | None,
            log: Callable[[str], None], *, json_failure_rate: float = DEFAULT_FAILURE_RATE) -> int:
    _startup_lines(args, engine, model, log)
    if fault is not None and fault.kind == "cuda_graph":
        return _fail(log, CUDA_GRAPH_LINES)
    if fault is not None and fault.kind == "hang":
        log("Init torch distributed begin.")
        while True:  # stuck in distributed init: only a signal ends it
            time.sleep(3600)
    if fault is not None and fault.kind == "port_in_use":
        return _fail(log, [fault.port_in_use_line(args.host, args.port)])
    import uvicorn  # imported late: argv errors and early faults must exit without paying for it

    rendezvous(args, log)
    if node_layout(args)[1] > 0:
        return _serve_dummy_health(args, uvicorn)
    window = context_window(model, args.get("context_length"))
    app = EmulatorApp(args, engine, fault=fault, log=log, context_len=window,
                      model_type=str(model.architecture), architectures=[model.name],
                      json_failure_rate=json_failure_rate)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="info", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    asyncio.run(server.serve())
    return 0 if server.started else 1


def _serve_dummy_health(args: ServerArgs, uvicorn: Any) -> int:
    """A node rank above 0: SGLang's dummy health server on `--port` (200 on `/health`, `/health_generate`)."""
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        found = scope["path"] in ("/health", "/health_generate")
        await send({"type": "http.response.start", "status": 200 if found else 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                                           access_log=False, lifespan="off"))
    asyncio.run(server.serve())
    return 0
