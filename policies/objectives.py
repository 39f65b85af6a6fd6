"""Objectives: what a policy maximises once the SLO holds, and how each pattern turns into a verdict.

Kinds (service.SLO's Objective): `latency` prefers a lower tail (p99 TTFT) within the SLO, `throughput`
maximises output tokens per second, `deadline` minimises completion hours, `cost` minimises cost per 1M
output tokens, `failure_rate` minimises failures, `goodput` maximises requests per second within the SLO's
per-request bounds. Failure rate comes first whatever the objective
(casebook, Structured Output API).
"""

from __future__ import annotations

import msgspec

from policies.changes import THROUGHPUT, Comparison, Direction, MetricChange, judge
from policies.evaluation import Evaluation
from policies.patterns import LABEL_FIGURES, group_state
from policies.settings import PolicySettings
from policies.slo_gate import LATENCY_TARGETS, NAMED_FIGURES, TTFT_TARGETS, averaged, completion_hours, moved_closer
from policies.wording import check_text, describe, move_text
from service import SLO, Objective, Pattern, SLOCheck, Verdict


def objective_change(objective: Objective, comparison: Comparison, changes: list[MetricChange],
                     slo: SLO) -> MetricChange | None:
    """The change of the figure the objective optimises, judged on its own (None when not reported)."""
    by_key = {c.spec.key: c for c in changes}
    if objective.kind == "latency":
        return by_key["p99_ttft_ms"]
    if objective.kind == "failure_rate":
        return by_key["failure_rate"]
    if objective.kind == "throughput":
        return by_key["output_throughput"]
    base, cand = averaged(comparison.baseline.results), averaged(comparison.candidate.results)
    if objective.kind == "goodput":
        return goodput_change(comparison) or by_key["request_throughput"]
    if objective.kind == "deadline":
        values = (completion_hours(base, slo), completion_hours(cand, slo))
        label, unit = "completion time", "h"
    else:
        values = (base.cost_per_1m_output_tokens, cand.cost_per_1m_output_tokens)
        label, unit = "cost per 1M output tokens", "$"
    if values[0] is None or values[1] is None:
        return by_key["output_throughput"] if objective.kind == "deadline" else None
    # Hours and cost per token scale with 1 / output throughput: they carry its relative noise.
    spec = msgspec.structs.replace(THROUGHPUT[0], label=label, unit=unit, higher_is_better=False,
                                   key="output_throughput")
    change = comparison.raw(spec, values=(values[0], values[1]))
    return judge([change], comparison.settings)[0]


def goodput_change(comparison: Comparison) -> MetricChange | None:
    """The change of the requests per second that meet every per-request bound of the SLO, judged with the
    request throughput's relative noise (goodput is a request rate); None when a side did not report it."""
    base, cand = averaged(comparison.baseline.results), averaged(comparison.candidate.results)
    good = (base.bench.request_goodput, cand.bench.request_goodput)
    if good[0] is None or good[1] is None:
        return None
    spec = msgspec.structs.replace(THROUGHPUT[1], label="goodput", key="request_throughput")
    return judge([comparison.raw(spec, values=(good[0], good[1]))], comparison.settings)[0]


# Objectives whose figure is output throughput (completion hours are tokens over throughput).
THROUGHPUT_OBJECTIVES = ("throughput", "deadline")


def pattern_verdict(pattern: Pattern, ev: Evaluation, slo: SLO, objective: Objective, settings: PolicySettings,
                    *, pessimistic: bool = False) -> tuple[Verdict, str]:
    """The casebook's next action for a pattern, as a verdict and the phrase that explains it.

    Args:
        pattern: The pattern the changes show.
        ev: The measured comparison (changes and both sides' SLO checks).
        slo: The targets.
        objective: What to optimise within them.
        settings: The policy's thresholds.
        pessimistic: Whether unproven worsenings count as worse (the fail-safe second reading).
    """
    unlabelled_worse = _unlabelled(ev.changes, Direction.WORSE)
    if pattern in (Pattern.THROUGHPUT_UP_LATENCY_DOWN, Pattern.THROUGHPUT_UP):
        if unlabelled_worse:
            # More throughput bought with a figure the label does not show (the ITL tail): a batch effect.
            return _batch_effect(ev, objective, settings)
        return Verdict.ACCEPT, "accepted"
    if pattern is Pattern.THROUGHPUT_UP_LATENCY_UP:
        return _batch_effect(ev, objective, settings)
    if pattern is Pattern.MEDIAN_FLAT_P99_DOWN:
        return _tail_only(ev.changes, slo, objective)
    if pattern is Pattern.LATENCY_DOWN and not unlabelled_worse:
        return Verdict.ACCEPT, "accepted"
    # A latency rise the label shows may still pay for an ITL tail it does not show that fell a lot (the
    # casebook's chunk sweep and PD split move max and p99 ITL): the trade-off rules then decide.
    traded_tail = any(abs(c.change) >= settings.tail_tradeoff_change
                      for c in _unlabelled(ev.changes, Direction.BETTER))
    wrong_way = pattern in (Pattern.THROUGHPUT_DOWN_LATENCY_UP, Pattern.LATENCY_UP)
    if pattern in (Pattern.THROUGHPUT_DOWN_TAIL_DOWN, Pattern.THROUGHPUT_DOWN, Pattern.LATENCY_TRADEOFF,
                   Pattern.LATENCY_DOWN) or (wrong_way and traded_tail):
        return _trade_off(ev, slo, objective, settings, pessimistic=pessimistic)
    if wrong_way:
        return Verdict.ROLLBACK, "rolled back"
    if pattern is Pattern.NOTHING_CHANGED:
        return _unlabelled_only(ev, slo, objective, unlabelled_worse)
    return Verdict.ROLLBACK, "baseline kept"


def _trade_off(ev: Evaluation, slo: SLO, objective: Objective, settings: PolicySettings,
               *, pessimistic: bool) -> tuple[Verdict, str]:
    """Lost throughput, or one latency for another: paid only by a drop in a figure the SLO names, which
    may be one the label does not show (p99 ITL under an `itl_p99_ms` target)."""
    further = _further_from_missed(ev)
    if further:
        return Verdict.ROLLBACK, f"rolled back: a trade-off that moves a missed target further away ({further})"
    return _stability_tradeoff(ev.changes, slo, objective, settings, pessimistic=pessimistic,
                               base_checks=ev.base_checks)


def _unlabelled_only(ev: Evaluation, slo: SLO, objective: Objective,
                     worse: list[MetricChange]) -> tuple[Verdict, str]:
    """Nothing the label shows moved: a figure outside it decides, if one moved (max ITL, p99 ITL)."""
    if worse:
        return Verdict.ROLLBACK, f"rolled back: {', '.join(describe(c) for c in worse)}"
    fell = _unlabelled(ev.changes, Direction.BETTER)
    if not fell:
        return Verdict.ROLLBACK, "baseline kept"
    # Only a tail the label does not show fell: the warming pattern's rule decides.
    verdict, phrase = _tail_only(ev.changes, slo, objective)
    if verdict is Verdict.ACCEPT:
        why = "a tail the SLO names" if named_figures(slo, objective) else "no latency target to weigh it against"
        phrase = f"accepted: {', '.join(describe(c) for c in fell)} ({why})"
    return verdict, phrase


def _unlabelled(changes: list[MetricChange], direction: Direction) -> list[MetricChange]:
    """The figures outside the label (request throughput, p99 ITL, max ITL) that moved in `direction`."""
    return [c for c in changes if c.spec.key not in LABEL_FIGURES and c.spec.group != "failure"
            and c.direction is direction]


def _batch_effect(ev: Evaluation, objective: Objective, settings: PolicySettings) -> tuple[Verdict, str]:
    # Casebook: "Throughput up, latency up: maintain if the SLO has headroom". Headroom concerns latency
    # targets; a missed deadline or throughput floor the candidate brings closer is progress, not a lack of
    # headroom (nightly batch: 9B + EAGLE3 at 16.9 h, removing it 14.1 h, the batch 10.6 h).
    before = {c.name: c for c in ev.base_checks}
    missed = [c for c in ev.cand_checks if not c.met]
    blocking = [c for c in missed if not (_latency_closer(ev, c) if c.name in LATENCY_TARGETS
                                          else moved_closer(c, before.get(c.name)))]
    held = _held_with_more_goodput(ev, blocking, settings.tail_tradeoff_change)
    blocking = [c for c in blocking if c not in held]
    if blocking:
        return Verdict.ROLLBACK, f"rolled back: no SLO headroom ({', '.join(c.name for c in blocking)} missed)"
    p99_ttft = ev.change("p99_ttft_ms")
    if objective.kind == "latency" and p99_ttft.direction is Direction.WORSE:
        eaten = _margin_eaten(ev.cand_checks, settings.latency_slo_margin)
        if eaten is not None:
            return Verdict.ROLLBACK, f"rolled back: the latency objective prefers the lower p99 TTFT ({eaten})"
    closer = [c for c in missed if c not in blocking and c not in held]
    reasons = []
    if closer:
        reasons.append("brings the missed target closer, still missed "
                       f"({', '.join(move_text(before[c.name], c) for c in closer)})")
    if held:
        good = goodput_change(ev.comparison)
        reasons.append(f"the missed target holds within noise ({', '.join(move_text(before[c.name], c) for c in held)})"
                       f" and more requests meet every bound ({describe(good) if good else 'goodput up'})")
    if closer:
        return Verdict.ACCEPT, "accepted: " + "; ".join(reasons)
    if held:
        return Verdict.KEEP_TRADEOFF, "kept: " + "; ".join(reasons)
    if objective.kind == "latency" and p99_ttft.direction is Direction.WORSE:
        return Verdict.KEEP_TRADEOFF, "kept: the p99 TTFT rise stays within the SLO margin"
    return Verdict.KEEP_TRADEOFF, "kept within SLO headroom"


def _latency_closer(ev: Evaluation, check: SLOCheck) -> bool:
    """Whether a missed latency target is closer beyond noise: the two sides' intervals for it are apart, and
    no pattern figure behind it got worse.

    The latency a batch effect raises then lies elsewhere (the running cap raised under EAGLE3: median ITL
    3.7 -> 6.4 ms against a 50 ms target, p95 TTFT 29.0 -> 21.4 s against 1 s): that latency has headroom,
    and the target the deployment misses is the one the change serves.
    """
    base, cand = ev.base_judged.get(check.name), ev.cand_judged.get(check.name)
    if base is None or cand is None or base.low is None or cand.high is None:
        return False
    if not cand.high < base.low:
        return False
    return all(ev.change(key).direction is not Direction.WORSE for key in NAMED_FIGURES.get(check.name, ()))


def _held_with_more_goodput(ev: Evaluation, missed: list[SLOCheck], a_lot: float) -> list[SLOCheck]:
    """The missed latency targets a batch effect leaves where they were, when it serves a lot more requests
    within every bound: each one's intervals overlap or the candidate's lies lower, and no pattern figure
    behind it got worse, while goodput rose beyond noise by at least `a_lot` (the pattern table's "down a
    lot", 20%) ([] otherwise).

    The latency the batch effect raises then lies elsewhere, within its own target, and the deployment misses
    the same target with more requests meeting it (NEXTN on DeepSeek-V4-Flash at 128 agentic streams: output
    tok/s +47%, median ITL -64%, p99 ITL +26% with no target on it, p95 TTFT 5.5 -> 5.8 s with the intervals
    overlapping against 5 s, goodput 4.71 -> 6.82 req/s). A chunk of 2048 on the same job (+6% throughput,
    goodput +4.7%, median TTFT +27%) buys too little to spend a missed target's noise on.
    """
    good = goodput_change(ev.comparison)
    if good is None or good.direction is not Direction.BETTER or good.change < a_lot:
        return []
    held = []
    for check in missed:
        base, cand = ev.base_judged.get(check.name), ev.cand_judged.get(check.name)
        if check.name not in LATENCY_TARGETS or base is None or cand is None or base.high is None \
                or cand.low is None or cand.low > base.high:
            continue
        if all(ev.change(key).direction is not Direction.WORSE for key in NAMED_FIGURES.get(check.name, ())):
            held.append(check)
    return held



def _further_from_missed(ev: Evaluation) -> str:
    """The missed latency targets whose figure the candidate makes worse beyond noise ("" when none).

    A stability trade-off spends throughput on the latency an SLO names; when the same round worsens the
    figure behind a target the candidate already misses (PD's first split: median ITL -43% for a tripled
    p99 TTFT against a missed TTFT p95 target), nothing the SLO asked for was bought.
    """
    worse = []
    for check in ev.cand_checks:
        if check.met or check.name not in NAMED_FIGURES:
            continue
        for key in NAMED_FIGURES[check.name]:
            change = ev.change(key)
            if change.direction is Direction.WORSE:
                worse.append(f"{check_text(check)}; {describe(change)}")
    return ", ".join(worse)


def _margin_eaten(cand_checks: list[SLOCheck], margin: float) -> str | None:
    """Why a p99 TTFT rise eats the SLO margin, or None when every TTFT target keeps `margin` to spare."""
    ttft = [c for c in cand_checks if c.name in TTFT_TARGETS]
    if not ttft:
        return "no TTFT target leaves a margin to spend"
    tight = [c for c in ttft if c.actual is None or c.actual > c.target * (1.0 - margin)]
    if tight:
        return f"the rise eats the SLO margin: {', '.join(check_text(c) for c in tight)}, under {margin:.0%} to spare"
    return None


def named_figures(slo: SLO, objective: Objective) -> set[str]:
    """The pattern figures the SLO's latency targets and the objective name (p99 TTFT for `latency`)."""
    named = {key for name, keys in NAMED_FIGURES.items() if getattr(slo, name) is not None for key in keys}
    if objective.kind == "latency":
        named.add("p99_ttft_ms")
    return named


def _tail_only(changes: list[MetricChange], slo: SLO, objective: Objective) -> tuple[Verdict, str]:
    # Casebook "Median unchanged, p99 only down: typical of HiCache/warming". Under a latency SLO the tail
    # that falls must be one the SLO or objective names: a smaller prefill chunk that only shortens decode
    # stalls (max ITL) under a TTFT-tail and median-ITL SLO buys nothing anyone asked for, and is where the
    # chunk sweep meets diminishing returns (casebook case 1 stops at 4096). With no latency target named,
    # any tail drop at flat throughput is welcome.
    named = named_figures(slo, objective)
    if not named or any(c.spec.key in named and c.direction is Direction.BETTER for c in changes):
        return Verdict.ACCEPT, "accepted"
    fell = ", ".join(describe(c) for c in changes if c.direction is Direction.BETTER)
    return Verdict.ROLLBACK, f"rolled back: the tail that fell ({fell}) is not one the SLO names, diminishing returns"


def _stability_tradeoff(changes: list[MetricChange], slo: SLO, objective: Objective, settings: PolicySettings,
                        *, pessimistic: bool, base_checks: list[SLOCheck]) -> tuple[Verdict, str]:
    # Casebook: "Throughput down, tail latency down a lot: maintain if a latency SLO exists". Lost
    # throughput is paid for only by the tail the SLO or objective names: chunk 4096 (-63% p99 TTFT for
    # -3.6%) is kept, chunk 2048 (-2.3% p99 TTFT for -6.4%) is not, whatever the ITL tail did.
    named = named_figures(slo, objective)
    if not named:
        return Verdict.ROLLBACK, "rolled back: no latency SLO pays for the lost throughput"
    loss = group_state(changes, "throughput", pessimistic=pessimistic).largest_loss
    paid = [c for c in changes if c.spec.key in named and c.direction is Direction.BETTER]
    if loss == 0.0:
        # No throughput lost: one latency traded for another, the rise held within target by the SLO gate.
        # The trade is worth a change only when what fell is a figure the SLO or objective names: mixed
        # chunking that cuts p99 ITL by 44% for +0.5 ms median TTFT, under a TTFT-tail and median-ITL SLO,
        # buys nothing anyone asked for (the warming pattern's rule, `_tail_only`).
        if paid:
            return Verdict.KEEP_TRADEOFF, "kept for the latency SLO"
        fell = ", ".join(describe(c) for c in changes if c.direction is Direction.BETTER
                         and c.spec.group != "throughput")
        return Verdict.ROLLBACK, f"rolled back: the latency that fell ({fell}) is not one the SLO names"
    gain = max((abs(c.change) for c in paid), default=0.0)
    if gain >= settings.tail_tradeoff_change and gain > loss:
        if objective.kind in THROUGHPUT_OBJECTIVES:
            spare = _met_with_room(base_checks, {c.spec.key for c in paid}, settings.latency_slo_margin)
            if spare:
                return (Verdict.ROLLBACK, f"rolled back: the {objective.kind} objective comes first, and the "
                        f"baseline already meets the latency the trade buys ({spare}), so {loss:.1%} less "
                        "throughput pays for nothing the SLO asks")
        return Verdict.KEEP_TRADEOFF, "kept for the latency SLO"
    shown = ", ".join(describe(c) for c in changes if c.spec.key in named)
    return (Verdict.ROLLBACK, f"rolled back: too little gain on the latency the SLO names ({shown}) "
            f"for {loss:.1%} less throughput")


def _met_with_room(base_checks: list[SLOCheck], keys: set[str], margin: float) -> str:
    """The baseline's latency targets behind `keys`, when every one is met with `margin` to spare ("" when
    one is missed, unreported or tight, so the trade is what the SLO needs)."""
    behind = [c for c in base_checks if c.name in NAMED_FIGURES and keys & set(NAMED_FIGURES[c.name])]
    if not behind or any(not c.met or c.actual is None or c.actual > c.target * (1.0 - margin) for c in behind):
        return ""
    return ", ".join(f"{check_text(c)}, {1.0 - c.actual / c.target:.0%} to spare" for c in behind
                     if c.actual is not None)


def objective_override(verdict: Verdict, objective: Objective,
                       change: MetricChange | None) -> tuple[Verdict, str] | None:
    """A verdict the cost objective imposes over the pattern's, with its phrase; None when it agrees.

    A cheaper configuration that holds the SLO is what the cost objective asks for, even when throughput
    falls (fewer GPUs); a dearer one is rolled back even when throughput rises. Goodput likewise: more
    requests served within the SLO's per-request bounds is what the goodput objective asks for.
    """
    if objective.kind not in ("cost", "goodput") or change is None:
        return None
    if change.direction is Direction.BETTER and not verdict.keeps_candidate():
        return Verdict.ACCEPT, f"accepted: the {objective.kind} objective comes first within the SLO"
    if change.direction is Direction.WORSE and verdict.keeps_candidate():
        return Verdict.ROLLBACK, f"rolled back: the {objective.kind} objective comes first"
    return None


def failure_verdict(failure: MetricChange) -> tuple[Verdict, str] | None:
    """Failure rate first: a proven rise rolls back, a proven drop keeps, whatever latency did."""
    if failure.direction is Direction.WORSE:
        return Verdict.ROLLBACK, "rolled back: failure rate comes first"
    if failure.direction is Direction.BETTER:
        return Verdict.ACCEPT, "accepted: failure rate takes precedence over latency"
    return None
