"""Which rolled-back candidates are worth a branch of the search: wins the SLO alone kept out.

The casebook judges one technique per round against the last accepted deployment. A fix judged alone can
miss an SLO target that the next fix would bring within reach (casebook case 2: cache_aware cannot help
while the prefix is broken). A candidate is an SLO-vetoed win when every one of these holds:

- it was not kept, and not for a measurement error or the failure-rate target (failures compound);
- it misses an SLO target, and judged as if every target were met on both sides the policy would keep it;
- it improves, beyond noise, the objective's own figure or the figure behind a target it still misses; or
  every target it misses is within noise of its pooled percentile's interval after the extra seeds, so
  the point estimate alone decided (the seed would decide the job: both sides are walked instead).

The engine keeps such a candidate as a branch the later techniques are tried on (`service.engine.beam`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import msgspec

from policies.changes import Direction
from policies.evaluation import Evaluation
from policies.objectives import objective_change
from policies.slo_gate import GateOutcome, target_change
from policies.slo_interval import Reading
from service import SLO, Objective, Pattern, Verdict

Judge = Callable[[Evaluation, SLO, Objective], tuple[Verdict, Pattern, str, list[str]]]


def slo_vetoed_win(ev: Evaluation, judge: Judge, slo: SLO, objective: Objective, verdict: Verdict,
                   alpha: float) -> bool:
    """Whether only the SLO kept the candidate out while it improved the objective or a missed target."""
    if verdict.keeps_candidate() or verdict is Verdict.ERROR:
        return False
    missed = [c for c in ev.cand_checks if not c.met]
    if not missed or any(c.name == "failure_rate_max" for c in missed):
        return False
    met = dataclasses.replace(
        ev, gate=GateOutcome(broken=[], newly_met=[], evidence={}),
        cand_checks=[msgspec.structs.replace(c, met=True) for c in ev.cand_checks],
        base_checks=[msgspec.structs.replace(c, met=True) for c in ev.base_checks])
    if not judge(met, slo, objective)[0].keeps_candidate():
        return False
    if all(ev.cand_judged.get(c.name) is not None and ev.cand_judged[c.name].reading is Reading.WITHIN_NOISE
           for c in missed):
        return True
    target = objective_change(objective, ev.comparison, ev.changes, slo)
    if target is not None and target.direction is Direction.BETTER:
        return True
    for check in missed:
        change = target_change(ev.comparison, slo, check, ev.base_checks)
        if change is not None and change.improves and change.p_value is not None and change.p_value < alpha:
            return True
    return False
