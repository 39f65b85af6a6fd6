"""The door's warnings about the starting scenario travel with the job into its report.

A scenario with a warning is accepted and run; a user who submitted it through the API, the CLI's `tune` or
MCP never saw `validate`'s output. The report keeps every warning, and when a missed SLO target is one a
warning says is measured wrongly (a p95 TTFT decided by the opening burst of 96 clients over 600 prompts),
the headline says so before it names the capacity that would meet the target.
"""

from __future__ import annotations

import asyncio

from service import SLO, Playbook, Scenario
from service.domain import BenchSpec, JobState
from service.engine import EngineParts, TuningEngine
from service.engine.render import render_html, render_markdown
from tests.unit.engine.fakes import FakeRunner, ThroughputPolicy, model_spec, scenario

FIGURES = {"output_throughput": 2800.0, "request_throughput": 3.8, "concurrency": 82.0, "p95_ttft_ms": 3379.0,
           "median_itl_ms": 22.0}


def _run(start: Scenario):
    parts = EngineParts(techniques={}, runner=FakeRunner(lambda _: dict(FIGURES)), policy=ThroughputPolicy(),
                        resolve=model_spec)
    return asyncio.run(TuningEngine(parts, Playbook(name="p", techniques=[]), start).run())


def test_a_missed_target_that_the_opening_burst_decides_is_flagged_in_the_headline_and_listed() -> None:
    outcome = _run(scenario(bench=BenchSpec(max_concurrency=96, num_prompts=600), slo=SLO(ttft_p95_ms=2000)))
    report = outcome.report
    assert outcome.job.state is JobState.SLO_NOT_MET
    [warning] = [w for w in report.warnings if w.startswith("bench.num_prompts: ")]
    assert "first 96 requests (max_concurrency) at once, 16% of its 600 prompts" in warning
    assert "fix: send num_prompts >= 1920" in warning
    [line] = [h for h in report.headline if h.startswith("Before round 0 the scenario check warned on ")]
    assert warning in line
    # It is read before the capacity sentence that would buy GPUs for the burst.
    capacity = [i for i, h in enumerate(report.headline) if h.startswith("Capacity to meet it")]
    assert all(report.headline.index(line) < i for i in capacity)
    markdown = render_markdown(report)
    assert "## Scenario warnings\n\n- bench.num_prompts: a round sends its first 96 requests" in markdown
    assert "<h2>Scenario warnings</h2><ul><li>bench.num_prompts: a round sends" in render_html(report)


def test_a_warning_about_another_figure_is_listed_but_kept_out_of_the_headline() -> None:
    # The burst decides p95 TTFT, a target this job met; only the list carries it.
    outcome = _run(scenario(bench=BenchSpec(max_concurrency=96, num_prompts=600),
                            slo=SLO(ttft_p95_ms=5000, itl_median_ms=10)))
    report = outcome.report
    assert outcome.job.state is JobState.SLO_NOT_MET  # the median ITL target is missed
    assert any(w.startswith("bench.num_prompts: ") for w in report.warnings)
    assert not [h for h in report.headline if "scenario check warned" in h]


def test_a_clean_scenario_reports_no_warnings() -> None:
    outcome = _run(scenario(bench=BenchSpec(max_concurrency=25, num_prompts=500), slo=SLO(ttft_p95_ms=5000)))
    assert outcome.report.warnings == []
    assert "Scenario warnings" not in render_markdown(outcome.report)
