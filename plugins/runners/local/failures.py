"""Named round failures: what went wrong, in which launch phase, read from exit codes and server logs.

Log patterns are SGLang's own lines: torch's `CUDA out of memory` and SGLang's `Not enough memory`
(`model_executor/model_runner.py`), the HiCache host pool's `Not enough host memory available`
(`mem_cache/pool_host/base.py`), `Capture cuda graph failed` (`model_executor/cuda_graph_runner.py`),
uvicorn's `address already in use`, the scheduler watchdog (`managers/scheduler.py`), and the retraction
warning `KV cache pool is full. Retract requests.`.
"""

from __future__ import annotations

import re

from plugins.runners.local.processes import ServerProcess

# (cause, pattern): the first match names the failure.
LOG_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("host_memory", re.compile(r"Not enough host memory", re.IGNORECASE)),
    ("oom", re.compile(r"CUDA out of memory|OutOfMemoryError|Not enough memory", re.IGNORECASE)),
    ("cuda_graph_capture", re.compile(r"Capture cuda graph failed", re.IGNORECASE)),
    ("port_in_use", re.compile(r"address already in use", re.IGNORECASE)),
    ("watchdog_timeout", re.compile(r"watchdog timeout", re.IGNORECASE)),
)
CAUSES = ("validation", "engine_missing", "router_missing", "port_in_use", "launch_exit", "host_memory", "oom",
          "cuda_graph_capture", "start_timeout", "health_timeout", "worker_died", "scheduler_stalled",
          "watchdog_timeout", "deadline", "retraction_storm", "requests_failed", "requests_refused")


# Causes a second launch of the same configuration meets again (a timeout, a port or a dead worker may not).
CONFIG_FAULTS = frozenset({"validation", "engine_missing", "router_missing", "ray_missing", "host_memory", "oom",
                           "cuda_graph_capture", "requests_refused"})

# SGLang's refusals of a request longer than the server admits: the context window (`tokenizer_manager.py`
# _validate_one_request) and the KV pool (`managers/utils.py` validate_input_length). The same deployment
# refuses the same prompt on every launch.
LIMIT_REFUSALS = ("exceeds the maximum allowed length", "maximum context length", "longer than the model's context")


def refused_for_limits(error: str) -> bool:
    """Whether `error` is SGLang refusing a request for the deployment's length limits."""
    return any(text in error for text in LIMIT_REFUSALS)


class RoundFailure(Exception):
    """A round failed: `cause` (one of CAUSES), the launch `phase`, and a sentence for people."""

    def __init__(self, cause: str, phase: str, message: str) -> None:
        super().__init__(f"{cause}: {message}")
        self.cause = cause
        self.phase = phase
        self.message = message


def cause_from_log(text: str) -> str | None:
    """The failure a server log names, if any."""
    for cause, pattern in LOG_CAUSES:
        if pattern.search(text):
            return cause
    return None


def log_excerpt(text: str, cause: str | None, lines: int = 3) -> str:
    """The log line that names `cause` (else the last lines), trimmed for an error message."""
    if cause is not None:
        for name, pattern in LOG_CAUSES:
            if name == cause:
                for line in text.splitlines():
                    if pattern.search(line):
                        return line.strip()[:300]
    tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail)[:300]


def exited(process: ServerProcess, phase: str) -> RoundFailure:
    """The failure of a process that exited on its own, named from its log where the log says why."""
    text = process.log_text()
    cause = cause_from_log(text)
    code = process.poll()
    if cause is None:
        cause = "launch_exit" if phase in ("start", "health") else "worker_died"
    how = f"exited with code {code}" if code is not None and code >= 0 else f"was killed by signal {-(code or 0)}"
    return RoundFailure(cause, phase, f"{process.name} {how} during {phase}: {log_excerpt(text, cause)}")


def dead_process(processes: list[ServerProcess]) -> ServerProcess | None:
    """The first process that is no longer running."""
    return next((p for p in processes if not p.stopped and p.poll() is not None), None)
