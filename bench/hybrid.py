"""Real rounds of `tune --runner hybrid` against `tune --runner local`, on emulated SGLang behind the real router.

Run: `.venv/bin/python -m bench.hybrid [--playbook NAME ...] [--prompts N] [--repeats R] [--time-scale S]`.
Each playbook's job runs twice in this process, once per runner, on the same seed: the `local` runner
measures every candidate; `hybrid` measures the baseline, calibrates the simulator on what it measured and
measures only the candidates a calibrated prediction cannot rule out. The emulator runs under a hidden
change of its step costs (`SGLANG_TUNER_EMULATOR_PERTURB`, x1.8 prefill, x1.4 decode, +2 ms a step: the
tuner never reads it), so the uncalibrated simulator would be off by it. A playbook's bench is cut to
`--prompts` requests (its techniques, scenario and policy are the casebook's) and emulated at a third of the
GPU's pace (`--time-scale 3`) so that a round takes seconds on a 2-core machine and the emulator's host keeps
up with the load. Prints one JSON line per playbook: both runs' measured rounds and benchmark runs, the
rounds closed on a prediction, every decision, whether the final deployments are the same, and wall times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import msgspec

from service.domain import Round, RoundResult, Source
from service.engine import TuningEngine, parts_from_host, round_context
from service.engine.overrides import with_playbook_bench
from service.playbooks import playbook_scenario
from service.plugin_host import PluginHost

PLAYBOOKS = ("coding-assistant", "structured-output", "document-qa-rag", "nightly-batch")
PERTURB = "decode=1.4,prefill=1.8,step_ms=2"
# A playbook fits this machine when its emulated baseline, with no hidden change, reproduces the simulator's
# within this on output throughput and median ITL: beyond it the emulator's own host cannot keep pace with
# the load (tokens arrive in bursts, requests queue in its event loop) and measures that, not the GPU.
FIT_TOLERANCE = 0.25
EMULATOR_COST_MODEL = "roofline"


def _real(results: list[RoundResult]) -> list[RoundResult]:
    return [r for r in results if r.provenance.source is not Source.SIMULATED]


def _decisions(rounds: list[Round]) -> list[list[str]]:
    out = []
    for r in rounds:
        decision = r.decision
        how = "predicted" if decision is not None and decision.figures.get("predicted") else (
            "measured" if _real(r.results) else "not run")
        out.append([r.delta.summary if r.delta else "baseline", decision.verdict.value if decision else "-", how])
    return out


def _playbook(host: PluginHost, name: str, prompts: int) -> Any:
    playbook = host.get("playbook", name)
    return msgspec.structs.replace(playbook, bench={**playbook.bench, "num_prompts": prompts,
                                                    "warm_prompts": min(playbook.bench.get("warm_prompts", 0), prompts)})


def fits(playbook_name: str, prompts: int, scenario_path: str | None = None) -> dict[str, Any]:
    """The playbook's baseline emulated with no hidden change against the simulator, on the same seed."""
    host = PluginHost()
    playbook = _playbook(host, playbook_name, prompts)
    scenario = with_playbook_bench(playbook_scenario(playbook, scenario_path), playbook)
    context = round_context(host, scenario)
    hidden = os.environ.pop("SGLANG_TUNER_EMULATOR_PERTURB", None)
    try:
        emulated = asyncio.run(host.get("runner", "local").run_round(scenario, seed=0, context=context))
    finally:
        if hidden is not None:
            os.environ["SGLANG_TUNER_EMULATOR_PERTURB"] = hidden
    # The simulator on the cost model the emulator timed its steps by.
    same = round_context(host, scenario, emulated.provenance.cost_model)
    simulated = asyncio.run(host.get("runner", "simulated").run_round(scenario, seed=0, context=same))
    errors = {f: round(getattr(emulated.bench, f) / getattr(simulated.bench, f) - 1, 3) if getattr(simulated.bench, f)
              else None for f in ("output_throughput", "median_itl_ms", "p95_ttft_ms")}
    ok = emulated.status.value == "ok" and all(
        e is not None and abs(e) <= FIT_TOLERANCE for f, e in errors.items() if f != "p95_ttft_ms")
    return {"fits": ok, "emulated_vs_simulated": errors, "status": emulated.status.value}


def run(playbook_name: str, runner: str, prompts: int, repeats: int,
        scenario_path: str | None = None) -> dict[str, Any]:
    host = PluginHost()
    playbook = _playbook(host, playbook_name, prompts)
    scenario = playbook_scenario(playbook, scenario_path)
    started = time.perf_counter()
    # The hybrid runner calibrates the cost model the emulator times its steps by (`roofline`), so what it
    # learns is the hidden change and this host's overheads, not the gap between two cost models.
    parts = parts_from_host(host, playbook, scenario, runner=runner, cost_model=EMULATOR_COST_MODEL)
    outcome = asyncio.run(TuningEngine(parts, playbook, scenario, seed=0, repeats=repeats).run())
    rounds = outcome.job.rounds
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "measured_rounds": sum(1 for r in rounds if _real(r.results)),
        "benchmark_runs": sum(len(_real(r.results)) for r in rounds),
        "predicted_rounds": sum(1 for r in rounds if r.decision is not None and r.decision.figures.get("predicted")),
        "decisions": _decisions(rounds),
        # What the job ends on: the model, the deployment and the workload (a prompt re-ordering changes only it).
        "final": msgspec.to_builtins({"model": outcome.final.model, "deployment": outcome.final.deployment,
                                      "workload": outcome.final.workload}),
        # Per screened round that was measured: the predicted figures' errors, and the predicted change's.
        "prediction_errors": [
            {k.replace("prediction_error_", "").replace("change_error_", "change "): round(v, 3)
             for k, v in r.decision.figures.items() if k.startswith(("prediction_error_", "change_error_"))}
            for r in rounds if r.decision is not None and any(k.startswith("prediction_error_")
                                                              for k in r.decision.figures)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--playbook", action="append", dest="playbooks")
    parser.add_argument("--prompts", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--time-scale", type=float, default=3.0,
                        help="Emulated seconds per GPU second (3: a third of the GPU's pace, so 2 cores keep up).")
    parser.add_argument("--scenario", default=None, help="A scenario file in place of each playbook's own.")
    parser.add_argument("--fits-only", action="store_true", help="Only check which playbooks fit this machine.")
    args = parser.parse_args()
    os.environ.update({"SGLANG_TUNER_RUNNER_ENGINE": "emulator", "SGLANG_TUNER_RUNNER_REMAP_PORTS": "1",
                       "SGLANG_TUNER_RUNNER_TIME_SCALE": str(args.time_scale),
                       "SGLANG_TUNER_EMULATOR_PERTURB": PERTURB})
    for name in args.playbooks or PLAYBOOKS:
        machine = fits(name, args.prompts, args.scenario)
        if not machine["fits"] or args.fits_only:
            print(json.dumps({"playbook": name, "prompts": args.prompts, "time_scale": args.time_scale, **machine,
                              "cpus": os.cpu_count()}), flush=True)
            continue
        local = run(name, "local", args.prompts, args.repeats, args.scenario)
        hybrid = run(name, "hybrid", args.prompts, args.repeats, args.scenario)
        print(json.dumps({
            "playbook": name, "scenario": args.scenario, "prompts": args.prompts, "repeats": args.repeats, "time_scale": args.time_scale,
            "same_final": local["final"] == hybrid["final"],
            "measured_rounds": {"local": local["measured_rounds"], "hybrid": hybrid["measured_rounds"]},
            "benchmark_runs": {"local": local["benchmark_runs"], "hybrid": hybrid["benchmark_runs"]},
            "seconds": {"local": local["seconds"], "hybrid": hybrid["seconds"]},
            "local": local, "hybrid": hybrid, "cpus": os.cpu_count(), **machine,
        }), flush=True)


if __name__ == "__main__":
    main()
