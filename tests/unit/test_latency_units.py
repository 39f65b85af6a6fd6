"""Two scenario values that are legal but almost always a slip, caught at the door as warnings.

An SLO's latencies are milliseconds; `ttft_p95_ms = 0.5` is half a second written in seconds, a target no
deployment can meet (a first token needs a whole prefill, and no forward pass of a loaded model takes under
a millisecond), so every round would miss it and the job would end `slo_not_met` after spending its
budget. A concurrency cap above a round's prompts sends them all at once and never binds. Both warn,
naming the field and the fix, and block nothing.
"""

from __future__ import annotations

import msgspec

from service import SLO, check_scenario
from service.sglang import errors
from tests.unit.techniques.scenarios import deployment, scenario

MODEL = "Qwen/Qwen3.6-9B"


def _issues(slo: SLO, clients: int = 8, prompts: int = 500):
    scen = scenario(MODEL, "H100-SXM", 1, deployment(MODEL, tp=1), clients=clients, slo=slo)
    scen = msgspec.structs.replace(scen, bench=msgspec.structs.replace(scen.bench, num_prompts=prompts))
    return [i for i in check_scenario(scen) if i.field.startswith(("slo", "bench"))]


def test_a_ttft_target_under_a_millisecond_warns_that_slo_latencies_are_milliseconds() -> None:
    [issue] = _issues(SLO(ttft_p95_ms=0.5))
    assert issue.severity == "warning" and issue.field == "slo.ttft_p95_ms"
    assert "ttft_p95_ms is 0.5 ms: no forward pass of a loaded model takes under a millisecond" in issue.message
    assert issue.hint == "SLO latencies are in milliseconds: for 0.5 s write ttft_p95_ms = 500"
    assert not errors(_issues(SLO(ttft_p95_ms=0.5)))


def test_real_targets_and_sub_millisecond_itl_pass_clean() -> None:
    # A median ITL under a millisecond is real under speculative decoding (several tokens per step).
    assert _issues(SLO(ttft_p95_ms=200, e2e_p95_ms=4000, itl_median_ms=0.8)) == []


def test_a_concurrency_cap_above_the_prompts_of_a_round_warns() -> None:
    [issue] = _issues(SLO(ttft_p95_ms=2000), clients=1000, prompts=300)
    assert issue.severity == "warning" and issue.field == "bench.max_concurrency"
    assert "max_concurrency 1000 is above num_prompts 300: every prompt of a round is sent at once" in issue.message
    assert "num_prompts >= 4000" in issue.hint
    assert _issues(SLO(ttft_p95_ms=2000), clients=300, prompts=300) == []
