"""Faults the emulator injects on command, each the way a real SGLang server shows it.

`SGLANG_TUNER_EMULATOR_FAULT=<kind>[:<n>]`:

| kind | what the server does |
|---|---|
| `oom` | logs torch's CUDA out-of-memory error while loading weights and exits 1 |
| `cuda_graph` | logs `Capture cuda graph failed` with SGLang's advice and exits 1 |
| `port_in_use` | logs uvicorn's `address already in use` bind error and exits 1 |
| `hang` | logs the first startup lines, then never opens its port (stuck in distributed init) |
| `crash[:n]` | dies (SIGKILL of itself, as `kill_process_tree` does) when the n-th request arrives (default 3) |
| `dead_scheduler[:n]` | the scheduler stops stepping at the n-th request; `/health` keeps answering 200 |
| `retraction_storm[:tokens]` | runs with a KV pool of that many tokens (default 2048), so decode keeps retracting |
"""

from __future__ import annotations

from typing import Literal

import msgspec

FAULT_ENV = "SGLANG_TUNER_EMULATOR_FAULT"
FaultKind = Literal["oom", "cuda_graph", "port_in_use", "hang", "crash", "dead_scheduler", "retraction_storm"]
FAULT_KINDS: tuple[FaultKind, ...] = ("oom", "cuda_graph", "port_in_use", "hang", "crash", "dead_scheduler",
                                "retraction_storm")
_DEFAULT_N = {"crash": 3, "dead_scheduler": 3, "retraction_storm": 2048}

# Text as torch and SGLang print it (srt/model_executor/cuda_graph_runner.py, torch.cuda OOM message).
OOM_LINES = (
    "Traceback (most recent call last):",
    '  File "sglang/srt/model_executor/model_runner.py", line 612, in load_model',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.19 GiB of which 1.06 GiB is free. Of the allocated memory 76.80 GiB is allocated by PyTorch.",
    "Received sigquit from a child process. It usually means the child failed.",
)
CUDA_GRAPH_LINES = (
    "Traceback (most recent call last):",
    '  File "sglang/srt/model_executor/cuda_graph_runner.py", line 402, in __init__',
    "Exception: Capture cuda graph failed: CUDA error: out of memory",
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --cuda-graph-backend-decode disabled. (Not recommended. Huge performance loss)",
    "Received sigquit from a child process. It usually means the child failed.",
)
CRASH_LINES = (
    "Scheduler hit an exception: Traceback (most recent call last):",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "Received sigquit from a child process. It usually means the child failed.",
)


class Fault(msgspec.Struct, frozen=True):
    """One injected fault: its kind and its count or size."""

    kind: FaultKind
    n: int

    def port_in_use_line(self, host: str, port: int) -> str:
        """uvicorn's bind failure, as a real port conflict prints it."""
        return f"ERROR:    [Errno 98] error while attempting to bind on address ('{host}', {port}): " \
               "address already in use"


class FaultSpecError(ValueError):
    """The fault variable names no known fault."""


def parse_fault(text: str | None) -> Fault | None:
    """The fault named by `text` (`crash:5`), None when empty; raises `FaultSpecError` for unknown kinds."""
    if not text:
        return None
    kind, _, count = text.strip().partition(":")
    if kind not in FAULT_KINDS:
        raise FaultSpecError(f"unknown emulator fault {kind!r}; known: {', '.join(FAULT_KINDS)}")
    try:
        n = int(count) if count else _DEFAULT_N.get(kind, 0)
    except ValueError:
        raise FaultSpecError(f"fault {kind!r} takes an integer, not {count!r}") from None
    return Fault(kind=kind, n=n)
