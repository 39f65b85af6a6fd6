"""An SGLang server stand-in for machines without GPUs: SGLang's HTTP API, timed by the simulator's engine.

`python -m service.emulator <sglang.launch_server argv>` (or `sglang-tuner emulate ...`) takes the argv of
the emulated SGLang version, serves its routes, logs its startup and batch lines, exports its `sglang:`
metrics, and times every scheduler step with the simulator's worker model in scaled real time. It can
inject the faults a real server shows. See docs/runners.md.
"""

from service.emulator.args import ArgvError, ServerArgs, parse_server_argv
from service.emulator.faults import FAULT_ENV, FAULT_KINDS, Fault, parse_fault
from service.emulator.server import run_emulator

__all__ = ["FAULT_ENV", "FAULT_KINDS", "ArgvError", "Fault", "ServerArgs", "parse_fault", "parse_server_argv",
           "run_emulator"]
