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
    try:
        raw = msgspec.to_builtins(own(results[0], slo)) if len(results) == 1 else None
        if raw is not None:
            return [_from_policy(item) for item in raw]
    except (TypeError, ValueError, msgspec.ValidationError, KeyError):
        pass
    return slo_checks(results, slo)


def _from_policy(item: dict[str, Any]) -> SLOCheck:
    return SLOCheck(name=str(item["name"]), target=float(item["target"]),
                    actual=None if item.get("actual") is None else float(item["actual"]),
                    met=bool(item["met"]))


UNITS: dict[str, str] = SLO_UNITS
