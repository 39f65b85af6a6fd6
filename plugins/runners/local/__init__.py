"""The `local` runner: real SGLang workers (or the emulator) and the real router on this host.

See docs/runners.md for the launch phases, their deadlines, the failures it names, its settings and what
it guarantees about the processes it starts.
"""

from plugins.runners.local.failures import CAUSES, RoundFailure
from plugins.runners.local.lifetime import group_members
from plugins.runners.local.processes import Launcher, ServerProcess, SubprocessLauncher
from plugins.runners.local.registry import RoundRegistry, end_orphans, state_dir
from plugins.runners.local.runner import LocalRunner

__all__ = ["CAUSES", "Launcher", "LocalRunner", "RoundFailure", "RoundRegistry", "ServerProcess",
           "SubprocessLauncher", "end_orphans", "group_members", "state_dir"]
