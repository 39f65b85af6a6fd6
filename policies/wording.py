"""How decisions read: one sentence a person can check, the supporting lines, and the figures."""

from __future__ import annotations

from policies.changes import Direction, MetricChange
from service import RoundResult, SLOCheck

_GROUP_ORDER = {"failure": 0, "throughput": 1, "latency": 2, "tail": 3}


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def p_text(change: MetricChange) -> str:
    """The p-value that decided: Holm-adjusted for an improvement, the metric's own for a worsening."""
    p = change.p_adjusted if change.p_adjusted is not None and change.improves else change.p_value
    if p is None:
        return "noise not measurable"
    if p < 0.001:
        return "p<0.001"
    if p < 0.01:
        return "p<0.01"
    return f"p={p:.2f}"


def describe(change: MetricChange) -> str:
    """"output throughput +31.5% (1499 -> 1971 tok/s, p<0.01)"."""
    if change.spec.group == "failure":
        return (f"failure rate {change.baseline:.2%} -> {change.candidate:.2%} "
                f"({change.change * 100:+.2f} points, {p_text(change)})")
    unit = f" {change.spec.unit}" if change.spec.unit else ""
    return (f"{change.spec.label} {change.change:+.1%} ({_number(change.baseline)} -> "
            f"{_number(change.candidate)}{unit}, {p_text(change)})")


def headline(changes: list[MetricChange], limit: int = 3) -> str:
    """The changes that counted, throughput first: "A with B and C"."""
    counted = [c for c in changes if c.direction in (Direction.BETTER, Direction.WORSE)]
    if not counted:
        counted = [c for c in changes if c.direction is Direction.UNCERTAIN]
    if not counted:
        counted = [c for c in changes if c.spec.key in ("output_throughput", "p99_ttft_ms")
                   and c.direction is not Direction.UNKNOWN]
    counted.sort(key=lambda c: (_GROUP_ORDER[c.spec.group], -abs(c.change)))
    parts = [describe(c) for c in counted[:limit]]
    if not parts:
        return "no metric could be compared"
    return parts[0] if len(parts) == 1 else f"{parts[0]} with {' and '.join(parts[1:])}"


def detail_lines(changes: list[MetricChange]) -> list[str]:
    """One line per metric compared, with its direction and how its noise was measured."""
    lines = []
    for c in changes:
        ci = f", 95% CI {c.ci[0]:+.1%}..{c.ci[1]:+.1%}" if c.ci and c.spec.group != "failure" else ""
        lines.append(f"{describe(c)}: {c.direction.value}{ci} [{c.method}]")
    return lines


def check_text(check: SLOCheck) -> str:
    """"ttft_p95_ms 812 (target 800)"."""
    actual = "not reported" if check.actual is None else _number(check.actual)
    return f"{check.name} {actual} (target {_number(check.target)})"


def move_text(before: SLOCheck, after: SLOCheck) -> str:
    """"deadline_hours 17.4 -> 14.1 (target 12.0)"."""
    def actual(check: SLOCheck) -> str:
        return "not reported" if check.actual is None else _number(check.actual)

    return f"{after.name} {actual(before)} -> {actual(after)} (target {_number(after.target)})"


def figures(changes: list[MetricChange], cand_checks: list[SLOCheck],
            base_checks: list[SLOCheck]) -> dict[str, float]:
    """The figures a decision carries: values, changes, p-values, CIs and SLO actuals of both sides.

    Every value is a plain `float` (never a numpy scalar), so a decision encodes as JSON anywhere.
    """
    out: dict[str, float] = {}
    for c in changes:
        key = c.spec.key
        out[f"{key}.baseline"], out[f"{key}.candidate"] = float(c.baseline), float(c.candidate)
        out[f"{key}.change"] = float(c.change)
        if c.p_value is not None:
            out[f"{key}.p"] = float(c.p_value)
        if c.p_adjusted is not None:
            out[f"{key}.p_adjusted"] = float(c.p_adjusted)
        if c.ci is not None:
            out[f"{key}.ci_low"], out[f"{key}.ci_high"] = float(c.ci[0]), float(c.ci[1])
    for side, checks in (("candidate", cand_checks), ("baseline", base_checks)):
        for check in checks:
            out[f"slo.{check.name}.target"] = float(check.target)
            out[f"slo.{check.name}.{side}_met"] = 1.0 if check.met else 0.0
            if check.actual is not None:
                out[f"slo.{check.name}.{side}"] = float(check.actual)
    return out


def goodput_figures(baseline: list[RoundResult], candidate: list[RoundResult]) -> tuple[list[str], dict[str, float]]:
    """The goodput line and figures (bench_serving's `--goodput` against the SLO's per-request bounds), when both
    sides report it: requests per second that met every bound, and the share of requests sent that did."""
    sides = []
    for results in (baseline, candidate):
        rates = [r.bench.request_goodput for r in results if r.bench.request_goodput is not None]
        shares = [r.bench.slo_attainment for r in results if r.bench.slo_attainment is not None]
        if not rates or not shares:
            return [], {}
        sides.append((sum(rates) / len(rates), sum(shares) / len(shares)))
    (base, base_share), (cand, cand_share) = sides
    bounds = candidate[0].bench.goodput_slos_ms or {}
    within = " ".join(f"{key}<={_number(value)}ms" for key, value in bounds.items())
    line = (f"goodput ({within}): {_number(base)} -> {_number(cand)} req/s, SLO attainment "
            f"{base_share:.1%} -> {cand_share:.1%}")
    return [line], {"request_goodput.baseline": float(base), "request_goodput.candidate": float(cand),
                    "slo_attainment.baseline": float(base_share), "slo_attainment.candidate": float(cand_share)}
