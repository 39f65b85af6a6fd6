"""`[bench.max_load]`: a bounded search for the highest load at which the SLO holds."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from service import SLO, BenchSpec, MaxLoadSearch, Objective, RoundStatus, Scenario
from service.engine.max_load import run_round
from service.scenario_check import check_scenario

from .fakes import FakeRunner, scenario


def _linear(scenario_: Scenario) -> dict[str, float]:
    """p95 TTFT 40 ms per request in flight (or per req/s); goodput = the load."""
    load = scenario_.bench.max_concurrency or scenario_.bench.request_rate or 1
    return {"p95_ttft_ms": 40.0 * load, "median_ttft_ms": 20.0 * load, "request_throughput": float(load),
            "output_throughput": 100.0 * load, "request_goodput": float(load), "slo_attainment": 1.0}


def _searching(search: MaxLoadSearch, slo: SLO) -> Scenario:
    base = scenario()
    return msgspec.structs.replace(base, slo=slo, bench=msgspec.structs.replace(base.bench, max_load=search))


def test_the_search_finds_the_last_concurrency_that_holds_within_its_probes() -> None:
    runner = FakeRunner(_linear)
    search = MaxLoadSearch(low=1, high=512, probes=12)
    result = asyncio.run(run_round(runner, _searching(search, SLO(ttft_p95_ms=1000)), seed=3, context=None))
    # 40 ms x 25 = 1000 holds, 26 misses.
    assert result.bench.max_load_under_slo == 25
    assert result.bench.p95_ttft_ms == 1000.0 and result.status is RoundStatus.OK
    assert len(runner.calls) <= 12
    assert {seed for _, seed in runner.calls} == {3}  # every probe on the round's traffic seed
    assert all(call.bench.max_load is None for call, _ in runner.calls)
    note = result.notes[-1]
    assert note.startswith("max_load over concurrency: the SLO held up to concurrency 25; probes: concurrency 1 held")
    assert "concurrency 512 missed (ttft_p95_ms 2.048e+04 > 1000)" in note


def test_a_budget_too_small_to_converge_keeps_the_best_that_held() -> None:
    runner = FakeRunner(_linear)
    result = asyncio.run(run_round(runner, _searching(MaxLoadSearch(low=1, high=512, probes=3),
                                                      SLO(ttft_p95_ms=1000)), seed=0, context=None))
    assert len(runner.calls) == 3
    held = result.bench.max_load_under_slo
    assert held is not None and 1 <= held <= 25 and result.bench.p95_ttft_ms <= 1000


def test_request_rate_is_searched_to_its_tolerance() -> None:
    runner = FakeRunner(_linear)
    search = MaxLoadSearch(over="request_rate", low=0.5, high=100.0, probes=16, tolerance=0.02)
    result = asyncio.run(run_round(runner, _searching(search, SLO(ttft_p95_ms=1000)), seed=0, context=None))
    held = result.bench.max_load_under_slo
    assert held is not None and 25 * 0.98 <= held <= 25.0


def test_the_high_end_holding_ends_the_search_at_once() -> None:
    runner = FakeRunner(_linear)
    result = asyncio.run(run_round(runner, _searching(MaxLoadSearch(low=2, high=8), SLO(ttft_p95_ms=1000)),
                                   seed=0, context=None))
    assert result.bench.max_load_under_slo == 8 and len(runner.calls) == 2


def test_a_slo_missed_at_the_lowest_load_reports_no_load() -> None:
    runner = FakeRunner(_linear)
    result = asyncio.run(run_round(runner, _searching(MaxLoadSearch(low=50, high=100), SLO(ttft_p95_ms=1000)),
                                   seed=0, context=None))
    assert result.bench.max_load_under_slo is None and len(runner.calls) == 1
    assert "the SLO did not hold even at concurrency 50" in result.notes[-1]


def test_a_search_without_a_target_to_hold_is_refused_naming_the_field() -> None:
    issues = check_scenario(_searching(MaxLoadSearch(), SLO(min_output_throughput=1000)))
    issue = next(i for i in issues if i.field == "bench.max_load")
    assert issue.severity == "error" and "ttft_p95_ms" in issue.hint


@pytest.mark.parametrize(("fields", "words"), [({"low": 10, "high": 5}, "low < high"),
                                               ({"probes": 40}, "2 to 16")])
def test_bad_bounds_name_the_fix(fields: dict[str, float], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        MaxLoadSearch(**fields)  # type: ignore[arg-type]


def test_the_objective_kind_goodput_exists() -> None:
    assert Objective(kind="goodput").kind == "goodput"
    assert BenchSpec(max_load=MaxLoadSearch()).max_load is not None
