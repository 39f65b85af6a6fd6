"""Time the simulator on the casebook's case-1 and case-5 rounds with the measured cost model.

Run: `.venv/bin/python -m bench.simulator [--runs R] [--skip-case5]`. Case 1: the coding-assistant round 0
(500 prompts, concurrency 25) through the `simulated` runner with `aiconfigurator`; the first round of the
process (loading aiconfigurator-core's perf database and compiling the engine) is reported separately, then
the median of R timed rounds. Case 5: the large-scale MoE round 0 (20,000 prompts, concurrency 1,400,
128 GPUs), one timed round after its own warm-up. Prints one JSON line with wall times, simulated seconds
per wall second and the peak resident memory (`resource.getrusage` ru_maxrss).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import msgspec

from service.components import RoundContext
from service.domain import RoundResult, Scenario
from service.plugin_host import PluginHost

EXAMPLES = Path(__file__).resolve().parents[1] / "playbooks" / "scenarios"


def _scenario(name: str) -> Scenario:
    return msgspec.toml.decode((EXAMPLES / f"{name}.toml").read_bytes(), type=Scenario)


def _timed(run: object, scenario: Scenario) -> tuple[float, RoundResult]:
    start = time.perf_counter()
    result = run(scenario)  # type: ignore[operator]
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-case5", action="store_true")
    args = parser.parse_args()
    host = PluginHost()
    runner = host.get("runner", "simulated")
    context = RoundContext(cost_models=host.components("cost_model"), cost_model="aiconfigurator")

    def run(scenario: Scenario) -> RoundResult:
        return asyncio.run(runner.run_round(scenario, context=context))

    case1 = _scenario("coding-assistant-round0")
    first, _ = _timed(run, case1)
    walls, result = [], None
    for _ in range(args.runs):
        wall, result = _timed(run, case1)
        walls.append(wall)
    assert result is not None
    median = statistics.median(walls)
    out: dict[str, object] = {
        "machine": f"{os.cpu_count()} cpus, {platform.processor() or platform.machine()}, "
                   f"Python {platform.python_version()}",
        "load_average": os.getloadavg()[0],
        "case1_first_round_s_incl_data_load": round(first, 3),
        "case1_runs_s": [round(w, 3) for w in walls], "case1_median_s": round(median, 3),
        "case1_simulated_s": round(result.bench.duration, 2),
        "case1_sim_s_per_wall_s": round(result.bench.duration / median, 1),
        "case1_cost_model": result.provenance.cost_model,
        "case1_fallback_steps": result.provenance.cost_model_fallback_steps,
    }
    if not args.skip_case5:
        case5 = _scenario("moe-at-scale-round0")
        warm = msgspec.structs.replace(case5, bench=msgspec.structs.replace(case5.bench, num_prompts=200))
        run(warm)  # loads the H200 data and compiles the DeepSeek engine outside the timed round
        wall5, result5 = _timed(run, case5)
        out.update(case5_s=round(wall5, 3), case5_completed=result5.bench.completed,
                   case5_simulated_s=round(result5.bench.duration, 2),
                   case5_sim_s_per_wall_s=round(result5.bench.duration / wall5, 1),
                   case5_note=result5.provenance.note)
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
