"""A completion deadline with no batch size is refused at the door, with the size to set.

`deadline_hours` is judged as the hours `slo.deadline_output_tokens` take at a round's output throughput
(casebook case 3). A Qwen3.6-4B batch on two L40S with `deadline_hours = 6` and `workload.total_requests`
but no token count ran eight rounds and ended `slo_not_met`, "deadline_hours unmeasured against 6h".
"""

from __future__ import annotations

import msgspec

from service import SLO, LengthDist, Objective, check_scenario
from service.sglang import errors
from tests.unit.techniques.scenarios import deployment, scenario

MODEL = "Qwen/Qwen3.6-4B"


def _batch(slo: SLO, *, total: int | None = 200_000, kind: str = "throughput"):
    scen = scenario(MODEL, "L40S", 2, deployment(MODEL), clients=256, slo=slo, objective=Objective(kind=kind))
    workload = msgspec.structs.replace(scen.workload, output=LengthDist(median=600, p95=1500), total_requests=total)
    return msgspec.structs.replace(scen, workload=workload)


def test_a_deadline_without_output_tokens_is_refused_with_the_size_from_the_workload() -> None:
    [issue] = errors(check_scenario(_batch(SLO(deadline_hours=6))))
    assert issue.field == "slo.deadline_hours"
    assert "slo.deadline_output_tokens is not set: no round could measure it" in issue.message
    # The mean of a log-normal with median 600 and p95 1,500 is about 700 tokens.
    assert issue.hint is not None and issue.hint.startswith("set slo.deadline_output_tokens = 1.39e+08 (workload."
                                                            "total_requests 200,000 x about 696 output tokens each")
    # No request count either: the hint says how the casebook sizes it.
    [bare] = errors(check_scenario(_batch(SLO(deadline_hours=6), total=None, kind="deadline")))
    assert bare.field == "slo.deadline_hours" and "2.4M requests x 150 = 3.6e8" in (bare.hint or "")
    # The deadline objective with no deadline target ranks by output throughput: nothing to size.
    assert not errors(check_scenario(_batch(SLO(), total=None, kind="deadline")))
    # An output law out of range is the range check's to name, not a crash here.
    broken = _batch(SLO(deadline_hours=6))
    broken = msgspec.structs.replace(broken, workload=msgspec.structs.replace(
        broken.workload, output=LengthDist(median=0)))
    assert any(i.field == "workload.output.median" for i in errors(check_scenario(broken)))


def test_a_sized_deadline_passes() -> None:
    assert not errors(check_scenario(_batch(SLO(deadline_hours=6, deadline_output_tokens=1.4e8))))
