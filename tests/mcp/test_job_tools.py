"""Job tools speak the service's /v1/jobs API: bodies, bearer token, summaries and problem details."""

from __future__ import annotations

import anyio
import httpx
import pytest
import respx

from service.mcp import ServiceJobs, ToolInputError
from service.mcp import job_tools as jt
from service.mcp.inputs import CompareRoundsInput, GetJobInput, JobRoundInput, StartTuningJobInput

BASE = "http://tuner.test"
JOB = {"id": "j1", "kind": "tune", "playbook": "coding-assistant", "runner": "simulator", "state": "queued",
       "queue_position": 0}
ROUNDS = [
    {"index": 0, "technique": "baseline", "state": "finished", "summary": "", "decision": None,
     "results": [{"bench": {"output_throughput": 1554.21, "p99_ttft_ms": 4380.92}}]},
    {"index": 1, "technique": "chunked_prefill", "state": "finished", "summary": "--chunked-prefill-size 4096",
     "decision": {"verdict": "keep_tradeoff", "pattern": "throughput_down_tail_down",
                  "reasons": ["P99 TTFT -63.0% for -3.6% throughput"]},
     "results": [{"bench": {"output_throughput": 1498.63, "p99_ttft_ms": 1621.05}}]},
]
JOBS = ServiceJobs(base_url=BASE, token="secret")


@respx.mock
def test_start_sends_the_job_body_with_the_bearer_token_and_links_the_next_steps() -> None:
    route = respx.post(f"{BASE}/v1/jobs").mock(return_value=httpx.Response(201, json=JOB))
    result = anyio.run(jt.start_tuning_job, JOBS, StartTuningJobInput(playbook="coding-assistant"))
    sent = route.calls.last.request
    assert sent.headers["Authorization"] == "Bearer secret"
    assert sent.read() == b'{"playbook":"coding-assistant","kind":"tune"}'
    assert result.links["report"] == f"{BASE}/v1/jobs/j1/report"
    assert "Poll get_job" in result.summary


@respx.mock
def test_explain_and_compare_read_the_rounds() -> None:
    respx.get(f"{BASE}/v1/jobs/j1/rounds").mock(return_value=httpx.Response(200, json=ROUNDS))
    explained = anyio.run(jt.explain_decision, JOBS, JobRoundInput(job_id="j1", round_index=1))
    assert "keep_tradeoff" in explained.summary and "-63.0%" in explained.summary
    compared = anyio.run(jt.compare_rounds, JOBS, CompareRoundsInput(job_id="j1", baseline_round=0, candidate_round=1))
    p99 = next(row for row in compared.data if row["figure"] == "p99_ttft_ms")
    assert round(p99["change"], 3) == -0.630


@respx.mock
def test_service_problems_reach_the_agent_with_the_fix() -> None:
    respx.get(f"{BASE}/v1/jobs/nope").mock(return_value=httpx.Response(
        404, json={"title": "Not Found", "detail": "no job 'nope'", "hint": "GET /v1/jobs lists jobs"}))
    with pytest.raises(ToolInputError, match="404.*no job 'nope'.*GET /v1/jobs lists jobs"):
        anyio.run(jt.get_job, JOBS, GetJobInput(job_id="nope"))
