"""Time a long trace end to end: read, profile and replay it on the simulator.

Run: `.venv/bin/python -m bench.trace [--hours H] [--session-rate R]`. A child process writes a multi-turn
chat trace with the example's generator (`scripts/gen_example_trace.py --out`: the example's sessions, turns
and lengths; the session rate and the length in hours are set here), so its token arrays stay out of this
process. Then it times `load_scenario` on `examples/traces/chat-sessions.toml` pointed at that trace (reading
and validating every record), `profile_trace`, and one simulated round replaying every record through the
`simulated` runner with `aiconfigurator`, after a 200-record round that loads the perf data. Prints one JSON
line: record count, file size, wall times, simulated seconds per wall second and the peak resident memory of
this process (`resource.getrusage` ru_maxrss).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from service.components import RoundContext
from service.plugin_host import PluginHost
from service.profile import profile_trace
from service.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "traces" / "chat-sessions.toml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--session-rate", type=float, default=1.0, help="sessions started per second")
    args = parser.parse_args()
    host = PluginHost()
    runner = host.get("runner", "simulated")
    context = RoundContext(cost_models=host.components("cost_model"), cost_model="aiconfigurator")
    with tempfile.TemporaryDirectory() as folder:
        trace_path = Path(folder) / "chat-sessions.jsonl"
        subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_example_trace.py"), "--out", str(trace_path),
                        "--hours", str(args.hours), "--session-rate", str(args.session_rate)], check=True,
                       stdout=subprocess.DEVNULL)
        scenario_path = Path(folder) / "scenario.toml"
        scenario_path.write_text(EXAMPLE.read_text().replace("num_prompts = 1383", "num_prompts = 10000000"))
        start = time.perf_counter()
        scenario = load_scenario(scenario_path)
        load_s = time.perf_counter() - start
        size = trace_path.stat().st_size
    assert scenario.bench.trace is not None
    records = scenario.bench.trace.records
    start = time.perf_counter()
    profile = profile_trace(records)
    profile_s = time.perf_counter() - start
    warm = msgspec.structs.replace(scenario, bench=msgspec.structs.replace(scenario.bench, num_prompts=200))
    asyncio.run(runner.run_round(warm, context=context))
    start = time.perf_counter()
    result = asyncio.run(runner.run_round(scenario, context=context))
    round_s = time.perf_counter() - start
    print(json.dumps({
        "machine": f"{os.cpu_count()} cpus, {platform.processor() or platform.machine()}, "
                   f"Python {platform.python_version()}",
        "load_average": os.getloadavg()[0],
        "records": len(records), "trace_mib": round(size / 2**20, 2),
        "load_scenario_s": round(load_s, 3), "profile_trace_s": round(profile_s, 3),
        "input_median": profile.input_median, "prefix_sharing_rate": round(profile.prefix_sharing_rate, 3),
        "round_s": round(round_s, 3), "round_status": str(result.status), "completed": result.bench.completed,
        "simulated_s": round(result.bench.duration, 1),
        "sim_s_per_wall_s": round(result.bench.duration / round_s, 1),
        "cache_hit_rate": round(result.server.cache_hit_rate, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }))


if __name__ == "__main__":
    main()
