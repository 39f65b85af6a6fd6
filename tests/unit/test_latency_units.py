"""Two scenario values that are legal but almost always a slip, caught at the door as warnings.

An SLO's latencies are milliseconds; `ttft_p95_ms = 0.5` is half a second written in seconds, a target no
deployment can meet (a first token needs a whole prefill, and no forward pass of a loaded model takes under
a millisecond), so every round would miss it and the job would end `slo_not_met` after spending its
budget. A concurrency cap above a round's prompts sends them all at once and never binds. A round whose
first `max_concurrency` requests (sent at once) are more than the share above a TTFT target's percentile
judges that target on its opening burst (gpt-oss-20b on one H100 at 96 clients: p95 TTFT 3,379 ms over 600
prompts, 319 ms over 2,000, simulated). Each warns, naming the field and the fix, and blocks nothing.
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
    # At the cap the concurrency binds; every prompt is still in the opening burst (next test).
    assert [i for i in _issues(SLO(ttft_p95_ms=2000), clients=300, prompts=300)
            if i.field == "bench.max_concurrency"] == []


def test_a_ttft_percentile_decided_by_the_opening_burst_warns_with_the_prompts_that_keep_it_out() -> None:
    # 96 clients over 600 prompts: 16% of the requests arrive at once, so p95 TTFT is the start-up queue.
    [issue] = _issues(SLO(ttft_p95_ms=2000), clients=96, prompts=600)
    assert issue.severity == "warning" and issue.field == "bench.num_prompts"
    assert "first 96 requests (max_concurrency) at once, 16% of its 600 prompts" in issue.message
    assert "p95 TTFT that slo.ttft_p95_ms is judged on falls among requests waiting for each other's prefills: it " \
           "measures that opening burst more than steady traffic at 96 clients" in issue.message
    assert issue.hint.startswith("send num_prompts >= 1920 (20x max_concurrency)")
    # A p99 target needs a burst within 1%; the casebook's 25 clients over 500 prompts keep p95 out of it.
    [p99] = _issues(SLO(ttft_p99_ms=2000), clients=25, prompts=500)
    assert "num_prompts >= 2500 (100x max_concurrency)" in p99.hint
    assert _issues(SLO(ttft_p95_ms=2000), clients=25, prompts=500) == []
    # Both targets: each gets its own warning, so following the p95 one alone does not hide the p99 one.
    both = _issues(SLO(ttft_p95_ms=2000, ttft_p99_ms=4000), clients=96, prompts=600)
    assert [i.hint.split(" (")[0] for i in both] == ["send num_prompts >= 1920", "send num_prompts >= 9600"]
    # No TTFT percentile target, or paced arrivals: nothing to warn about.
    assert _issues(SLO(itl_median_ms=50), clients=96, prompts=600) == []
    paced = scenario(MODEL, "H100-SXM", 1, deployment(MODEL, tp=1), clients=96, slo=SLO(ttft_p95_ms=2000))
    paced = msgspec.structs.replace(paced, bench=msgspec.structs.replace(paced.bench, num_prompts=600,
                                                                        request_rate=8.0))
    assert [i for i in check_scenario(paced) if i.field == "bench.num_prompts"] == []
