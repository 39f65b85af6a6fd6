"""What a change held back only for want of a quality result would do for a job that ends short of its SLO.

The quality gate closes a candidate that changes what the model outputs (FP8) without a passing quality result,
and spends no GPU time on it (casebook case 1: "Quality verification must be done concurrently"). When the job
then ends missing a target, that change is often the lever left: Llama-3.1-8B BF16 on one 24 GB L4 decodes at
81 ms against a 60 ms target, its 16 GB of weights read every step. So the report names the change, what unlocks
it, and what it would do: the final deployment with the change applied is simulated, as is the final deployment
itself, on the same cost model, seed and traffic. The line is labelled as simulated with its cost model; it is an
estimate for deciding whether to run the quality check, never a measurement.
"""

from __future__ import annotations

import asyncio
from typing import Any

from service.calibration import simulate_chosen
from service.components import RoundContext
from service.domain import Round, RoundResult, RoundStatus, Scenario, SLOCheck
from service.engine.delta import DeltaError, apply_delta, delta_key
from service.engine.slo import policy_slo_checks, target_figure

# The quality gate's reason when no result names the change (`service.engine.quality.check_quality`).
NO_RESULT = "no quality result for "


def gated_rounds(rounds: list[Round]) -> list[Round]:
    """Rounds closed unmeasured because no quality result names their change, each change once."""
    seen: set[str] = set()
    out = []
    for round_ in rounds:
        decision = round_.decision
        if round_.delta is None or round_.results or decision is None or not decision.reasons \
                or not decision.reasons[0].startswith(NO_RESULT):
            continue
        key = delta_key(round_.delta)
        if key not in seen:
            seen.add(key)
            out.append(round_)
    return out


async def gated_levers(final: Scenario, checks: list[SLOCheck], rounds: list[Round], context: RoundContext | None,
                       policy: Any, seed: int) -> list[str]:
    """One line per change the quality gate held back, with its simulated effect on the missed targets
    ([] when every target is met or no change was held back). Never raises."""
    missed = [c for c in checks if not c.met]
    held = gated_rounds(rounds)
    if not missed or not held or context is None:
        return []
    try:
        as_is = await asyncio.to_thread(simulate_chosen, final, seed, context)
    except Exception:  # an estimate never costs the job its ending
        as_is = None
    lines = []
    for round_ in held:
        assert round_.delta is not None and round_.decision is not None
        unlock = round_.decision.reasons[0].split(";")[0]
        head = (f"`{round_.delta.summary}` (round {round_.index}) was never run: {unlock}; add a passing one to the "
                "scenario's `quality` list to let a job measure it")
        lines.append(head + await _estimate(final, round_, missed, as_is, context, policy, seed) + ".")
    return lines


async def _estimate(final: Scenario, round_: Round, missed: list[SLOCheck], as_is: RoundResult | None,
                    context: RoundContext, policy: Any, seed: int) -> str:
    assert round_.delta is not None
    try:
        candidate = apply_delta(final, round_.delta)
    except DeltaError as exc:
        return f" (it does not apply to the final deployment: {exc})"
    try:
        result = await asyncio.to_thread(simulate_chosen, candidate, seed, context)
    except Exception as exc:
        return f" (no simulated estimate: {type(exc).__name__}: {exc})"
    if result.status is not RoundStatus.OK or as_is is None or as_is.status is not RoundStatus.OK:
        failed = result if result.status is not RoundStatus.OK else as_is
        return f" (no simulated estimate: {failed.error if failed is not None else 'the simulation failed'})"
    after = {c.name: c for c in policy_slo_checks(policy, [result], final.slo)}
    before = {c.name: c for c in policy_slo_checks(policy, [as_is], final.slo)}
    figures = ", ".join(
        f"{c.name} {target_figure(before[c.name].actual, c.name)} -> {target_figure(after[c.name].actual, c.name)} "
        f"against {target_figure(c.target, c.name)}" for c in missed if c.name in after and c.name in before)
    if not figures:
        return ""
    still = [name for name, check in after.items() if not check.met]
    verdict = f"would still miss {', '.join(still)}" if still else "would meet every SLO target"
    provenance = result.provenance
    source = f"{provenance.cost_model or 'unknown'} cost model{', calibrated' if provenance.calibration else ''}"
    return f"; simulated ({source}), not measured, on the final deployment it {verdict} ({figures})"


__all__ = ["gated_levers", "gated_rounds"]
