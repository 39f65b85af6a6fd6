"""Diagnoses: the casebook's reading of a bench_serving result, over HTTP (`POST /v1/diagnoses`)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import msgspec
from litestar import post
from litestar.params import JSONBody

from service.api.auth import SECURITY
from service.api.problems import Problem, from_decode_error, problem_responses
from service.diagnosis import Diagnosis, DiagnosisContext, DiagnosisInputError, context_from_scenario, diagnose
from service.domain import Scenario, WorkloadProfile

Text = Annotated[str, msgspec.Meta(max_length=1_000_000)]


class DiagnosisRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A benchmark to read, and what else is known about the deployment that produced it.

    Attributes:
        bench_output: bench_serving's printed result block (any version) or one line of its `--output-file`
            JSONL.
        metrics: The body of the server's `/metrics` at the end of the run: adds token_usage, queue,
            cache_hit_rate and retractions to the reading.
        scenario: The scenario benchmarked (the format of POST /v1/jobs): its workload profile, SLO, model
            and deployment inform the reading.
        failure_rate: Share of outputs that failed to parse or validate (bench_serving does not print it).
        server_log: SGLang server log text: `preempting` warnings and speculative accept lengths.
    """

    bench_output: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)]
    metrics: Text | None = None
    scenario: dict[str, Any] | None = None
    failure_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    server_log: Text | None = None


def _inputs(data: DiagnosisRequest) -> tuple[WorkloadProfile | None, DiagnosisContext]:
    if data.scenario is None:
        return None, DiagnosisContext(failure_rate=data.failure_rate, server_log=data.server_log)
    try:
        scenario = msgspec.convert(data.scenario, Scenario)
    except msgspec.ValidationError as exc:
        raise from_decode_error(exc, prefix="scenario") from exc
    return scenario.workload, context_from_scenario(scenario, failure_rate=data.failure_rate,
                                                    server_log=data.server_log)


@post("/v1/diagnoses", operation_id="createDiagnosis", opt={"scope": "read"}, security=SECURITY, status_code=200,
      tags=["diagnoses"], responses=problem_responses(400, 401, 403, 413, 415, 422))
async def create_diagnosis(data: JSONBody[DiagnosisRequest]) -> Diagnosis:
    """Read a benchmark in the casebook's order: findings with evidence and rule, and the technique to try next.

    Nothing is stored: the answer is computed from the body alone.
    """
    profile, context = _inputs(data)
    try:
        # Parsing a large /metrics scrape or server log is CPU work: keep it off the loop that serves the API.
        return await asyncio.to_thread(diagnose, data.bench_output, data.metrics, profile, context=context)
    except DiagnosisInputError as exc:
        raise _unreadable(str(exc)) from exc


def _unreadable(message: str) -> Problem:
    # The diagnosis names the input it could not read first: "metrics: ..." or "bench_output: ...".
    field, _, detail = message.partition(": ")
    if field not in ("metrics", "bench_output"):
        field, detail = "bench_output", message
    hints = {"bench_output": "paste bench_serving's printed block (from 'Serving Benchmark Result' to its closing "
                             "line) or one line of its --output-file JSONL",
             "metrics": "pass the body of `curl http://HOST:PORT/metrics` of a server started with --enable-metrics, "
                        "or leave metrics out"}
    return Problem(422, "unreadable-input", "Unreadable diagnosis input", detail, field=field, hint=hints[field])
