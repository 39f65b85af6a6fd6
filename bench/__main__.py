"""Run every benchmark in this folder: `python -m bench` (or `make bench`), or one: `python -m bench.profile`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

BENCHMARKS = ["profile", "simulator", "trace", "tune", "api", "api_list"]


def main() -> int:
    status = 0
    for name in BENCHMARKS:
        if importlib.util.find_spec(f"bench.{name}") is None:
            continue
        print(f"== bench.{name}", flush=True)
        status |= subprocess.call([sys.executable, "-m", f"bench.{name}"])
    return status


if __name__ == "__main__":
    sys.exit(main())
