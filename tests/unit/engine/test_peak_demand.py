"""A workload's peak request rate the final deployment was not measured at is said in the report's headline.

Casebook case 2 ends "Peak 22 req/s is not met by 12.81 req/s, so either adding another node or pre-warming
popular documents is needed". Its benchmark held 22 clients; served at 4.17 req/s (the simulated final of the
document-qa-rag playbook), the peak would hold about 115 requests in flight, a load no round measured.
"""

from __future__ import annotations

import asyncio

from service import SLO, Playbook, Scenario, WorkloadProfile
from service.domain import BenchSpec, JobState
from service.engine import EngineParts, TuningEngine
from service.engine.ending import peak_demand
from tests.unit.engine.fakes import FakeRunner, ThroughputPolicy, model_spec, ok_result, scenario

FIGURES = {"output_throughput": 1250.0, "request_throughput": 4.17, "concurrency": 22.0, "p95_ttft_ms": 900.0,
           "median_itl_ms": 14.0}


def _scenario(peak: float | None, slo: SLO) -> Scenario:
    return scenario(workload=WorkloadProfile(peak_concurrency=22, request_rate=8.0, peak_request_rate=peak),
                    bench=BenchSpec(max_concurrency=22), slo=slo)


def test_the_headline_says_the_peak_was_not_measured_and_how_to_measure_it() -> None:
    start = _scenario(22.0, SLO(ttft_p95_ms=1500))
    parts = EngineParts(techniques={}, runner=FakeRunner(lambda _: dict(FIGURES)), policy=ThroughputPolicy(),
                        resolve=model_spec)
    outcome = asyncio.run(TuningEngine(parts, Playbook(name="p", techniques=[]), start).run())
    assert outcome.job.state is JobState.SUCCEEDED  # the SLO's own targets hold; the peak is not one of them
    (line,) = [h for h in outcome.report.headline if "peaks at" in h]
    assert line.startswith("The workload peaks at 22 req/s; the final deployment served 4.17 req/s with 22 "
                           "requests in flight; at the peak about 116 would be (Little's law)")
    assert "bench.request_rate = 22" in line and "slo.min_request_throughput = 22" in line


def test_nothing_is_said_when_the_peak_was_served_or_is_already_a_target_or_unknown() -> None:
    served = [ok_result(**{**FIGURES, "request_throughput": 22.5})]
    measured = [ok_result(**FIGURES)]
    assert peak_demand(_scenario(22.0, SLO()), served) == ""
    assert peak_demand(_scenario(22.0, SLO(min_request_throughput=22.0)), measured) == ""
    assert peak_demand(_scenario(None, SLO()), measured) == ""
    assert peak_demand(_scenario(22.0, SLO()), measured) != ""
    # 139.86 of 140 req/s is the casebook's "almost reached" and counts as carried.
    assert peak_demand(_scenario(140.0, SLO()), [ok_result(**{**FIGURES, "request_throughput": 139.86})]) == ""
