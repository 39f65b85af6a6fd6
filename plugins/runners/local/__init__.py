"""The `local` runner: real SGLang workers (or the emulator) and the real router on this host.

See docs/runners.md for the launch phases, their deadlines, the failures it names and its settings.
"""

from plugins.runners.local.failures import CAUSES, RoundFailure
from plugins.runners.local.processes import Launcher, ServerProcess, SubprocessLauncher, group_members
from plugins.runners.local.runner import LocalRunner

__all__ = ["CAUSES", "Launcher", "LocalRunner", "RoundFailure", "ServerProcess", "SubprocessLauncher",
           "group_members"]
