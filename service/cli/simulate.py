"""`sglang-tuner round SCENARIO.toml`: run one benchmark round on a runner (the simulator by default)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from pathlib import Path

import click
import msgspec

from service.cli.checks import refuse_invalid, use_ray_address
from service.cli.database import calibrated_option, db_option, stored_calibrations
from service.domain import BenchSpec, RoundResult
from service.engine import round_context
from service.engine.max_load import run_round
from service.plugin_host import PluginHost
from service.scenario import InputFileError, load_scenario


def register(main: click.Group) -> None:
    """Add the `round` command to the CLI."""
    main.add_command(round_command)


@click.command("round")
@click.argument("scenario_path", metavar="SCENARIO.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--runner", default="simulated", show_default=True, help="Runner plugin that runs the round.")
@click.option("--seed", type=int, default=None, help="Random seed (default: the scenario's bench seed).")
@click.option("--cost-model", default=None,
              help="Cost model for simulated step times (default: aiconfigurator where it has data, else roofline).")
@click.option("--ray-address", default=None, metavar="ADDRESS",
              help="The ray runner's cluster: ray://head:10001, auto, or local (a throwaway cluster on this host); "
                   "default: the runner setting ray_address, else RAY_ADDRESS, else local.")
@calibrated_option
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the whole RoundResult as JSON.")
def round_command(scenario_path: Path, runner: str, seed: int | None, cost_model: str | None,
                  ray_address: str | None, calibrated: bool, db_url: str, as_json: bool) -> None:
    """Run one benchmark round of SCENARIO.toml and print bench_serving's figures."""
    use_ray_address(ray_address)
    try:
        scenario = load_scenario(scenario_path)
    except InputFileError as exc:
        raise click.ClickException(str(exc)) from exc
    refuse_invalid(scenario, scenario_path)
    host = PluginHost()
    try:
        chosen = host.get("runner", runner)
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from exc
    # The one choice `tune` and the service make too.
    context = round_context(host, scenario, cost_model, stored_calibrations(db_url, calibrated))
    received: list[signal.Signals] = []
    try:
        result = asyncio.run(_until_stopped(run_round(chosen, scenario, seed=seed, context=context), received))
    except asyncio.CancelledError:
        sig = received[0] if received else signal.SIGTERM
        click.echo(f"round stopped by {sig.name}; the runner stopped what it had started", err=True)
        raise SystemExit(128 + sig) from None
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
    else:
        click.echo(_summary(result, scenario.bench))
    if result.status == "failed":
        raise SystemExit(1)


# SIGINT already cancels the round (asyncio.run turns it into a cancellation, so the runner tears down);
# SIGTERM (kill, systemd, a container stop) and SIGHUP (a closed terminal) would end the process without
# that, leaving the servers running: they cancel the round the same way.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


async def _until_stopped(round_: Awaitable[RoundResult], received: list[signal.Signals]) -> RoundResult:
    """Await the round; a stop signal (appended to `received`) cancels it, so the runner's teardown runs
    before the command exits."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(sig: signal.Signals) -> None:
        received.append(sig)
        task.cancel()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop, sig)
    try:
        return await round_
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


def _traffic(bench: BenchSpec) -> list[str]:
    """What a trace round replayed (other rounds' traffic is the workload's, as the scenario says)."""
    trace = bench.trace
    if trace is None:
        return []
    records = len(trace.parts(bench.warm_prompts, bench.num_prompts)[1])
    timing = f"at their times x{trace.slowdown:g}" if trace.timestamps else "closed loop, ignoring their times"
    return [f"traffic: trace {trace.file or '(inline)'}, {records} of {len(trace.records)} records, {timing}"]


def _summary(result: RoundResult, bench: BenchSpec) -> str:
    b, s = result.bench, result.server
    lines = [
        f"status: {result.status}" + (f" ({result.error})" if result.error else ""),
        *_traffic(bench),
        f"source: {result.provenance.source} via {result.provenance.runner}, cost model "
        f"{result.provenance.cost_model} ({result.provenance.cost_model_fallback_steps} fallback steps)"
        + (f": {result.provenance.cost_model_detail}" if result.provenance.cost_model_detail else ""),
        f"Successful requests:              {b.completed}",
        f"Benchmark duration (s):           {b.duration:.2f}",
        f"Request throughput (req/s):       {b.request_throughput:.2f}",
        f"Output token throughput (tok/s):  {b.output_throughput:.2f}",
        f"Concurrency:                      {b.concurrency:.2f}",
        f"Median / P99 TTFT (ms):           {b.median_ttft_ms:.2f} / {b.p99_ttft_ms:.2f}",
        f"Median / P99 / Max ITL (ms):      {b.median_itl_ms:.2f} / {b.p99_itl_ms:.2f} / {b.max_itl_ms:.2f}",
        f"token_usage {s.token_usage:.2f}  cache_hit_rate {s.cache_hit_rate:.2f}  "
        f"num_retracted_requests_total {s.num_retracted_requests_total}",
    ]
    if b.request_goodput is not None and b.slo_attainment is not None:
        bounds = " ".join(f"{key}:{value:g}" for key, value in (b.goodput_slos_ms or {}).items())
        lines.append(f"Request goodput (req/s):          {b.request_goodput:.2f}  (SLO attainment "
                     f"{b.slo_attainment:.1%}; per-request bounds ms {bounds})")
    if bench.max_load is not None:
        held = "none" if b.max_load_under_slo is None else f"{b.max_load_under_slo:g}"
        lines.append(f"Max load under the SLO ({bench.max_load.over}): {held}")
    tiers = s.cache_hit_rate_by_tier
    if tiers:
        lines.append("cache hits by tier: " + "  ".join(f"{tier} {share:.2f}" for tier, share in tiers.items()))
    if s.eplb_balancedness is not None:
        lines.append(f"eplb_balancedness {s.eplb_balancedness:.3f} (mean/max expert load per GPU)")
    if s.missing:
        lines.append(f"missing: {', '.join(s.missing)}")
    if result.cost_per_1m_output_tokens is not None:
        lines.append(f"Cost ($/1M output tokens):        {result.cost_per_1m_output_tokens:.2f}")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)
