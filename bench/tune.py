"""Time `sglang-tuner tune --playbook P --json` end to end on the simulated runner.

Run: `.venv/bin/python -m bench.tune [--playbook NAME ...] [--runs R] [--processes N ...]`. Each playbook
runs as its own process (the CLI exactly as a user runs it, import and cost-model loading included), R
times, once per `--processes` value (the simulated runner's worker processes,
`SGLANG_TUNER_SIMULATED_PROCESSES`; default: its own default); prints one JSON line per playbook and
process count: wall seconds of each run, their median, the target (60 s; 300 s for
moe-at-scale), rounds run, repeats per round, the rounds that built the final deployment, the branches
walked, and every round's verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASEBOOK = ("coding-assistant", "document-qa-rag", "nightly-batch", "structured-output", "moe-at-scale")
TARGET_SECONDS = {"moe-at-scale": 300.0}
DEFAULT_TARGET = 60.0


def run_once(playbook: str, processes: int | None) -> tuple[float, dict]:
    """Wall seconds of one `tune --json` process and its report."""
    cli = Path(sys.executable).with_name("sglang-tuner")
    env = dict(os.environ)
    if processes is not None:
        env["SGLANG_TUNER_SIMULATED_PROCESSES"] = str(processes)
    started = time.perf_counter()
    done = subprocess.run([str(cli), "tune", "--playbook", playbook, "--json"], capture_output=True, text=True,
                          check=True, env=env)
    return time.perf_counter() - started, json.loads(done.stdout)


def summary(playbook: str, runs: int, processes: int | None = None) -> dict:
    """Median wall time of `runs` runs, the target, and what the last run decided."""
    seconds: list[float] = []
    report: dict = {}
    for _ in range(runs):
        elapsed, report = run_once(playbook, processes)
        seconds.append(round(elapsed, 2))
    target = TARGET_SECONDS.get(playbook, DEFAULT_TARGET)
    median = statistics.median(seconds)
    rounds = report["rounds"]
    return {
        "playbook": playbook, "processes": processes, "runs_s": seconds, "median_s": round(median, 2), "target_s": target,
        "met": median <= target, "rounds": len(rounds), "repeats": max(r["repeats"] for r in rounds),
        # The rounds that built the final deployment (its path), and the branches the search walked.
        "kept": [rounds[i]["delta"]["summary"] for i in report.get("path", []) if rounds[i]["delta"]],
        "branches": report.get("branches", []),
        "decisions": [[r["delta"]["summary"] if r["delta"] else "baseline", r["verdict"]] for r in rounds],
        "slo_met": report["slo"]["met"], "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }


def main() -> None:
    """Parse arguments and print one JSON line per playbook."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--playbook", action="append", choices=CASEBOOK, help="default: all five casebook playbooks")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--processes", type=int, action="append",
                        help="simulated runner worker processes (repeat to compare; default: its own)")
    args = parser.parse_args()
    for playbook in args.playbook or CASEBOOK:
        for processes in args.processes or [None]:
            print(json.dumps(summary(playbook, args.runs, processes)), flush=True)


if __name__ == "__main__":
    main()
