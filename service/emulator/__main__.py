"""`python -m service.emulator <sglang.launch_server argv>`: the engine command the `local` runner uses."""

import sys

from service.emulator.server import run_emulator

if __name__ == "__main__":
    sys.exit(run_emulator(sys.argv[1:]))
