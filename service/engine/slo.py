"""SLO assessment of a round, for the report: each target, the measured figure, met or not."""

from __future__ import annotations

from typing import Any

import msgspec

from service.domain import SLO, SLO_UNITS, RoundResult, SLOCheck
from service.domain import slo_checks as domain_slo_checks
from service.engine.measure import mean_result


def slo_checks(results: list[RoundResult], slo: SLO) -> list[SLOCheck]:
    """Every set SLO target against the mean over a round's repeats; a missing figure is not met."""
    return domain_slo_checks(mean_result(results), slo)


def policy_slo_checks(policy: Any, results: list[RoundResult], slo: SLO) -> list[SLOCheck]:
    """The policy's own `slo_checks(result, slo)` when it has one (so report and decision agree), else ours."""
    own = getattr(policy, "slo_checks", None)
    if own is None or not results:
        return slo_checks(results, slo)
    # Every repeat, so the report and the ending judge the pooled figures the decisions did; a policy whose
    # method takes one result is asked with the first when there is only one.
    for argument in (results, results[0] if len(results) == 1 else None):
        if argument is None:
            continue
        try:
            return [_from_policy(item) for item in msgspec.to_builtins(own(argument, slo))]
        except (TypeError, ValueError, AttributeError, msgspec.ValidationError, KeyError):
            continue
    return slo_checks(results, slo)


def _from_policy(item: dict[str, Any]) -> SLOCheck:
    return SLOCheck(name=str(item["name"]), target=float(item["target"]),
                    actual=None if item.get("actual") is None else float(item["actual"]),
                    met=bool(item["met"]))


UNITS: dict[str, str] = SLO_UNITS


def target_figure(value: float | None, name: str) -> str:
    """An SLO figure with its unit: "25,390ms", "5.5h", "unmeasured" (never an exponent)."""
    if value is None:
        return "unmeasured"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif value and abs(value) < 1e-3:
        text = f"{value:.8f}".rstrip("0")
    else:
        text = f"{value:.4g}"
    return f"{text}{UNITS.get(name, '')}"
