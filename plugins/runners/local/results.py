"""Turning what a round measured (or why it failed) into a `RoundResult`."""

from __future__ import annotations

from typing import Any

from plugins.runners.local.failures import CONFIG_FAULTS, RoundFailure, refused_for_limits
from service import (
    BenchFigures,
    PhaseResult,
    Provenance,
    RequestSamples,
    RoundResult,
    RoundStatus,
    Scenario,
    ServerMetrics,
    Source,
)


def provenance(scenario: Scenario, *, emulated: bool, cost_model: str | None, time_scale: float,
               runner: str = "local") -> Provenance:
    """Where the figures come from: measured on SGLang, or emulated (with the emulator's clock)."""
    note = (f"emulated SGLang workers timed by the {cost_model or 'roofline'} cost model at time scale {time_scale:g}"
            if emulated else "")
    return Provenance(source=Source.EMULATED if emulated else Source.MEASURED, runner=runner,
                      cost_model=(cost_model or "roofline") if emulated else None,
                      sglang_version=scenario.sglang_version, note=note)


def failed(failure: RoundFailure, origin: Provenance, notes: list[str], *, bench: BenchFigures | None = None,
           server: ServerMetrics | None = None) -> RoundResult:
    """A failed round: cause and phase named; figures attached when the load did run."""
    return RoundResult(status=RoundStatus.FAILED, provenance=origin, error=str(failure), error_phase=failure.phase,
                       config_fault=failure.cause in CONFIG_FAULTS, bench=bench or BenchFigures(),
                       server=server or ServerMetrics(), notes=notes)


def accept_length(server_info: dict[str, Any]) -> float | None:
    """bench_serving's `accept_length`: `/server_info` internal_states[0].avg_spec_accept_length."""
    states = server_info.get("internal_states") or [{}]
    value = states[0].get("avg_spec_accept_length") if isinstance(states[0], dict) else None
    return float(value) if value else None


def json_note(scenario: Scenario, invalid: dict[str, int] | None, attempted: int) -> str | None:
    """What the audit of a structured-output round's JSON found, or why nothing audited it."""
    if scenario.workload.structured_output.mode == "none":
        return None
    if invalid is None:
        return ("structured outputs not audited: bench_serving keeps no generated text, so invalid JSON is not in "
                "the failure rate")
    total = sum(invalid.values())
    if not total:
        return f"JSON audit: every completed output followed its schema ({attempted} requests)"
    split = ", ".join(f"{kind} {count / max(attempted, 1):.2%}" for kind, count in invalid.items())
    return f"JSON audit: {total / max(attempted, 1):.2%} of outputs invalid ({split})"


def measured(scenario: Scenario, origin: Provenance, bench: BenchFigures, server: ServerMetrics,
             samples: RequestSamples, *, attempted: int, notes: list[str], first_error: str,
             invalid: dict[str, int] | None = None) -> RoundResult:
    """A round whose load ran: OK, PARTIAL when some requests failed.

    `invalid` counts the completed structured outputs that failed their schema, by kind (None: not audited);
    they count in the failure rate as the casebook's audit counts them, and their timings stay in the figures.
    """
    failures = attempted - bench.completed
    if (note := json_note(scenario, invalid, attempted)) is not None:
        notes = [*notes, note]
    invalid_total = sum((invalid or {}).values())
    price = scenario.hardware.gpu_hour_price * scenario.deployment.total_gpus()
    cost = price / (bench.output_throughput * 3600 / 1e6) if bench.output_throughput > 0 else None
    # The server's expert balance is per GPU rank (mean/max); the round's imbalance is its inverse (max/mean).
    balance = server.eplb_balancedness
    return RoundResult(
        status=RoundStatus.PARTIAL if failures else RoundStatus.OK, provenance=origin, bench=bench, server=server,
        expert_imbalance=1.0 / balance if balance else None,
        failure_rate=(failures + invalid_total) / max(attempted, 1), cost_per_1m_output_tokens=cost, samples=samples,
        error=f"{failures} of {attempted} requests failed; first: {first_error}" if failures else None,
        error_phase="load" if failures else None, config_fault=bool(failures) and refused_for_limits(first_error),
        notes=notes)



def warm_note(warmed: PhaseResult, warm_prompts: int, time_scale: float) -> str:
    """What the round served before measuring: the workload's traffic (`bench.warm_prompts`), then the warm-up.

    `warmed` holds the served requests' outcomes first (as `run_load` returns them); a served request that
    failed left the cache colder than a live service's, which the note says rather than failing the round.
    """
    served = warmed.outcomes[:warm_prompts]
    ok = sum(o.success for o in served)
    failed_note = f", {len(served) - ok} failed" if ok < len(served) else ""
    return (f"warm_prompts: served {ok} of the workload's requests{failed_note} and "
            f"{len(warmed.outcomes) - len(served)} warm-up request(s) before the measured run, in "
            f"{warmed.duration / max(time_scale, 1e-9):.1f}s; excluded from every figure")
