"""Job tools: start, watch, explain, compare and cancel tuning jobs of a running `sglang-tuner serve`.

Jobs are durable and run in the service's workers, so these tools speak to the service's HTTP API
(`/v1/jobs`) rather than running the engine inside the MCP process: a job started by an agent survives the
agent's session and shows up for people in the API and the report pages. Over stdio the service is found
through `SGLANG_TUNER_URL`, with a key from `SGLANG_TUNER_TOKEN`; mounted in the service at `/mcp`, the
same requests go to the service's own app in-process, carrying the caller's bearer token, so one code path
(and one set of scope checks) serves both.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from service.domain import JobState
from service.engine import load_report, shell_line
from service.mcp.inputs import CompareRoundsInput, GetJobInput, JobInput, JobRoundInput, StartTuningJobInput
from service.mcp.tools import ToolInputError, ToolResult, bounded

URL_ENV = "SGLANG_TUNER_URL"
TOKEN_ENV = "SGLANG_TUNER_TOKEN"
# Headline figures compared between rounds, as bench_serving names them.
HEADLINE = ("output_throughput", "request_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms",
            "p99_itl_ms")


class ServiceUnavailable(ToolInputError):
    """No service to talk to, or it refused the request; the message says what to do."""


@dataclass(frozen=True)
class ServiceJobs:
    """A client of the service's job API.

    Attributes:
        base_url: The service's URL (None: no service; job tools say how to start one).
        token: The API key to send.
        timeout: Seconds to wait for an answer (a long-poll adds its wait).
        transport: An httpx transport, e.g. `httpx.ASGITransport(app)` to call the service in-process.
        public_url: The base of the links handed to agents; "" for paths relative to the service.
        caller_token: Returns the token to send per request (the MCP caller's), instead of `token`.
    """

    base_url: str | None
    token: str | None = None
    timeout: float = 10.0
    transport: httpx.AsyncBaseTransport | None = None
    public_url: str | None = None
    caller_token: Callable[[], str | None] | None = None

    @classmethod
    def from_env(cls) -> ServiceJobs:
        """Read `SGLANG_TUNER_URL` and `SGLANG_TUNER_TOKEN`."""
        return cls(base_url=os.environ.get(URL_ENV) or None, token=os.environ.get(TOKEN_ENV) or None)

    def link(self, path: str) -> str:
        """The full URL of an API path (the path alone when no service is configured)."""
        base = self.public_url if self.public_url is not None else self.base_url
        return f"{base.rstrip('/')}{path}" if base else path

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None, *,
                   params: dict[str, Any] | None = None, extra_timeout: float = 0.0) -> Any:
        """Send one request and return the decoded JSON body.

        Raises:
            ServiceUnavailable: no service configured, unreachable, or an error status (with its problem detail).
        """
        if not self.base_url:
            raise ServiceUnavailable(f"job tools need a running service: start `sglang-tuner serve` and set {URL_ENV} "
                                     f"(and {TOKEN_ENV} to a write-scoped key to start or cancel jobs).")
        token = self.caller_token() if self.caller_token is not None else self.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout + extra_timeout, headers=headers,
                                         transport=self.transport) as client:
                response = await client.request(method, path, json=body, params=params)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(f"cannot reach the service at {self.base_url}: {exc}. Fix: check {URL_ENV}.") from exc
        if response.status_code >= 400:
            raise ServiceUnavailable(_problem(response))
        return response.json()


def _problem(response: httpx.Response) -> str:
    try:
        problem = response.json()
    except ValueError:
        return f"the service answered {response.status_code}: {response.text[:300]}"
    detail = problem.get("detail") or problem.get("title") or response.reason_phrase
    hint = problem.get("hint") or ("set SGLANG_TUNER_TOKEN to a write-scoped key" if response.status_code in (401, 403)
                                   else "")
    if response.status_code == 422 and problem.get("field"):
        # A refused job request (a scenario that fails the door check): name the tool argument at fault.
        return f"invalid argument `{problem['field']}`: {detail}" + (f". Fix: {hint}." if hint else ".")
    field = f" (field `{problem['field']}`)" if problem.get("field") else ""
    return f"the service answered {response.status_code}{field}: {detail}" + (f". Fix: {hint}." if hint else "")


def _job_links(jobs: ServiceJobs, job_id: str) -> dict[str, str]:
    base = f"/v1/jobs/{job_id}"
    return {"job": jobs.link(base), "rounds": jobs.link(f"{base}/rounds"), "events": jobs.link(f"{base}/events"),
            "report": jobs.link(f"{base}/report"), "cancel": jobs.link(f"{base}/cancel")}


async def start_tuning_job(jobs: ServiceJobs, args: StartTuningJobInput) -> ToolResult:
    """POST /v1/jobs."""
    body: dict[str, Any] = {"playbook": args.playbook, "kind": args.kind}
    body |= {k: v for k, v in (("runner", args.runner), ("scenario", args.scenario), ("resource", args.resource))
             if v is not None}
    job = await jobs.call("POST", "/v1/jobs", body)
    return ToolResult(summary=f"Job {job['id']} is {job['state']} (playbook {job['playbook']}, runner {job['runner']}). "
                              "Poll get_job until its state is terminal.",
                      data=job, links=_job_links(jobs, job["id"]))


async def get_job(jobs: ServiceJobs, args: GetJobInput) -> ToolResult:
    """GET /v1/jobs/{id} (long-polled with `wait_seconds`); a finished job also shows its final launch commands."""
    params = {"wait": args.wait_seconds} if args.wait_seconds else None
    job = await jobs.call("GET", f"/v1/jobs/{args.job_id}", params=params, extra_timeout=args.wait_seconds)
    queued = f", position {job['queue_position']} in the queue" if job.get("queue_position") is not None else ""
    summary = f"Job {job['id']}: {job['state']}{queued}."
    data: dict[str, Any] = {"job": job}
    if job["state"] in FINISHED:
        report = await jobs.call("GET", f"/v1/jobs/{args.job_id}/report")
        final = _final(report)
        data["final"] = final
        summary += f" Stop reason: {job.get('stop_reason')}." + "".join(
            f"\n{command}" for command in final["commands"])
    bounded_data, truncated = bounded(data)
    return ToolResult(summary=summary, data=bounded_data, truncated=truncated, links=_job_links(jobs, args.job_id))


FINISHED = tuple(state.value for state in JobState if state.is_terminal())


def _final(body: dict[str, Any]) -> dict[str, Any]:
    """The final deployment's launch commands (as argv lists and as shell lines), the SLO check, what was kept."""
    report = load_report(body)
    if report is None:
        return {"launch_commands": [], "router_command": None, "commands": [], "slo": None, "kept": [],
                "headline": []}
    final = report.final
    commands = [] if final is None else [*final.launch_commands, *filter(None, [final.router_command])]
    return {"launch_commands": msgspec.to_builtins(final.launch_commands) if final else [],
            "router_command": msgspec.to_builtins(final.router_command) if final else None,
            "commands": [shell_line(c) for c in commands],
            "slo": msgspec.to_builtins(report.slo), "kept": report.job.accepted, "headline": report.headline}


async def cancel_job(jobs: ServiceJobs, args: JobInput) -> ToolResult:
    """POST /v1/jobs/{id}/cancel."""
    job = await jobs.call("POST", f"/v1/jobs/{args.job_id}/cancel")
    return ToolResult(summary=f"Cancel requested for job {args.job_id}; the last accepted deployment is restored.",
                      data=job, links=_job_links(jobs, args.job_id))


async def list_rounds(jobs: ServiceJobs, args: JobInput) -> ToolResult:
    """GET /v1/jobs/{id}/rounds, summarised one line per round."""
    rounds = await jobs.call("GET", f"/v1/jobs/{args.job_id}/rounds")
    lines = [f"{r['index']}. {r['technique']}: {r['state']}, "
             f"{(r.get('decision') or {}).get('verdict', 'no decision')} - {r.get('summary', '')}" for r in rounds]
    brief = [{k: r.get(k) for k in ("index", "technique", "state", "summary", "decision")} for r in rounds]
    data, truncated = bounded(brief)
    return ToolResult(summary="\n".join(lines) or "No rounds yet.", data=data, truncated=truncated,
                      links=_job_links(jobs, args.job_id))


async def explain_decision(jobs: ServiceJobs, args: JobRoundInput) -> ToolResult:
    """The policy's decision on one round: verdict, pattern, reasons and deciding figures."""
    round_ = _round(await jobs.call("GET", f"/v1/jobs/{args.job_id}/rounds"), args.round_index)
    decision = round_.get("decision")
    if not decision:
        return ToolResult(summary=f"Round {args.round_index} ({round_['state']}) has no decision yet.", data=round_)
    reasons = "; ".join(decision.get("reasons", []))
    summary = (f"Round {args.round_index} ({round_['technique']}): {decision['verdict']} on the pattern "
               f"'{decision['pattern']}'. {reasons}")
    return ToolResult(summary=summary, data=decision, links=_job_links(jobs, args.job_id))


async def compare_rounds(jobs: ServiceJobs, args: CompareRoundsInput) -> ToolResult:
    """Headline figures of two rounds side by side with the change."""
    rounds = await jobs.call("GET", f"/v1/jobs/{args.job_id}/rounds")
    base, cand = _round(rounds, args.baseline_round), _round(rounds, args.candidate_round)
    rows = []
    for key in HEADLINE:
        before, after = _figure(base, key), _figure(cand, key)
        change = (after - before) / before if before and after is not None else None
        rows.append({"figure": key, "baseline": before, "candidate": after, "change": change})
    lines = [f"{r['figure']}: {r['baseline']} -> {r['candidate']}"
             + (f" ({r['change']:+.1%})" if r["change"] is not None else "") for r in rows]
    return ToolResult(summary="\n".join(lines), data=rows, links=_job_links(jobs, args.job_id))


def _round(rounds: list[dict[str, Any]], index: int) -> dict[str, Any]:
    for round_ in rounds:
        if round_["index"] == index:
            return round_
    raise ToolInputError(f"invalid argument `round_index`: the job has no round {index}. "
                         f"Fix: use one of {[r['index'] for r in rounds]} (list_rounds shows them).")


def _figure(round_: dict[str, Any], key: str) -> float | None:
    results = round_.get("results") or []
    values = [r.get("bench", {}).get(key) for r in results if r.get("bench", {}).get(key) is not None]
    return sum(values) / len(values) if values else None
