"""Prompts longer than the model's context window are refused at the door, naming the window and the fix.

SGLang refuses a request whose prompt and answer exceed the context length (the model's
max_position_embeddings, or a smaller --context-length). A workload whose median prompt is past it would
have most requests refused in every round; one whose p95 prompt and answer pass it loses its longest few
percent, which a user should know before reading any failure rate.
"""

from __future__ import annotations

from service import LengthDist, WorkloadProfile, check_scenario
from service.sglang import errors
from tests.unit.techniques.scenarios import deployment, scenario

MODEL = "zai-org/GLM-4.5-Air"  # max_position_embeddings 131072


def _check(median: int, p95: int, output: int = 1000, **server: object):
    workload = WorkloadProfile(input=LengthDist(median=median, p95=p95), output=LengthDist(median=output, p95=output),
                               peak_concurrency=4)
    return check_scenario(scenario(MODEL, "H200-SXM", 4, deployment(MODEL, tp=4, **server), clients=4,
                                   workload=workload))


def test_a_median_prompt_past_the_window_is_an_error_naming_the_window() -> None:
    [issue] = [i for i in errors(_check(150_000, 180_000)) if i.field.startswith("workload")]
    assert issue.field == "workload.input.median"
    assert "150,000 tokens is longer than zai-org/GLM-4.5-Air's context window of 131,072 tokens" in issue.message
    assert "shorten the prompts below 131,072 tokens" in issue.hint


def test_a_tail_past_the_window_is_a_warning_and_a_workload_inside_it_is_clean() -> None:
    [issue] = [i for i in _check(60_000, 130_500) if i.field.startswith("workload")]
    assert issue.severity == "warning" and issue.field == "workload.input.p95"
    assert "131,500 tokens" in issue.message and "refuses the longest few percent" in issue.message
    assert not [i for i in _check(60_000, 120_000) if i.field.startswith("workload")]


def test_a_smaller_context_length_on_the_server_is_the_window() -> None:
    issues = _check(40_000, 50_000, extra={"--context-length": 32768})
    [issue] = [i for i in errors(issues) if i.field.startswith("workload")]
    assert "the server's --context-length of 32,768 tokens" in issue.message
