"""The `attach` runner: benchmarks an endpoint that is already serving, without starting or stopping anything.

For baselines and monitoring of a live deployment. The target is the runner settings' `attach_url`, else
the deployment's router URL, else its first worker's; it must fully match a pattern of the settings'
`attach_allowlist` (empty by default, so nothing is reachable until an operator says so). Worker metrics
are scraped from the target and, behind a router, from the workers its `/workers` lists that the allowlist
also admits.

With `bench.warm_prompts`, the workload's traffic is sent first (a live service's cache is already warm,
but a round may follow a restart or a cache flush); the metrics scrape that starts the round's counter
deltas comes after it and the warm-up, so the figures cover the measured requests only.
"""

from __future__ import annotations

from typing import ClassVar

import httpx
import msgspec

from plugins.runners.local.failures import RoundFailure
from plugins.runners.local.results import accept_length, failed, measured, provenance, warm_note
from plugins.runners.local.round import load_plan
from plugins.runners.local.scrape import counter_deltas, missing_note, scrape, server_metrics
from service import (
    LoadAborted,
    RoundContext,
    RoundResult,
    Runner,
    RunnerCapabilities,
    RunnerSettings,
    Scenario,
    bench_figures,
    build_prompts,
    json_failures,
    load_runner_settings,
    render_scenario,
    request_samples,
    resolve_model,
    run_load,
)


def target_url(scenario: Scenario, settings: RunnerSettings) -> str:
    """The endpoint to measure: `attach_url`, else the router's URL, else the first worker's."""
    if settings.attach_url:
        return settings.attach_url.rstrip("/")
    launch = render_scenario(scenario, allow=settings.allow_flags)
    return launch.router.url if launch.router is not None else launch.workers[0].url


async def _metric_urls(client: httpx.AsyncClient, target: str, settings: RunnerSettings) -> list[str]:
    try:
        response = await client.get(target + "/workers")
        listed = [w.get("url", "") for w in response.json().get("workers", [])] if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError, AttributeError):
        listed = []
    workers = [url.rstrip("/") for url in listed if url and settings.url_allowed(url.rstrip("/"))]
    return workers or [target]


class AttachRunner(Runner):
    """Measures a running endpoint; restarts nothing."""

    name: ClassVar[str] = "attach"
    capabilities: ClassVar[RunnerCapabilities] = RunnerCapabilities(
        restarts_servers=False, measures_real_gpus=True, needs_gpu=False)

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        """Warm up, scrape, load, scrape; a URL outside the allowlist is refused before any request."""
        context = context or RoundContext()
        origin = provenance(scenario, emulated=False, cost_model=None, time_scale=1.0, runner=self.name)
        try:
            settings = load_runner_settings(context.settings)
            target = target_url(scenario, settings)
            if not settings.url_allowed(target):
                raise RoundFailure("validation", "validate", f"{target} matches no pattern of the runner settings' "
                                                             "attach_allowlist")
            return await self._measure(scenario, settings, target, seed, origin)
        except RoundFailure as failure:
            return failed(failure, origin, [])
        except (msgspec.ValidationError, ValueError, OSError) as exc:
            return failed(RoundFailure("validation", "validate", str(exc)), origin, [])

    async def _measure(self, scenario: Scenario, settings: RunnerSettings, target: str, seed: int | None,
                       origin: object) -> RoundResult:
        bench = scenario.bench
        plan = load_plan(scenario, settings, target, seed)
        warm, requests = build_prompts(scenario.workload, bench, resolve_model(scenario.model), seed=plan.seed)
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0)) as client:
            urls = await _metric_urls(client, target, settings)
            before: list[dict[str, float] | None] = []

            async def between(load_client: httpx.AsyncClient) -> None:
                """After warm-up: flush the cache when asked, then scrape metrics."""
                if bench.flush_cache:
                    await load_client.post(target + "/flush_cache", params={"timeout": 60})
                before.extend(await scrape(load_client, urls))

            try:
                warmed, load = await run_load(plan, warm, requests, between=between)
            except LoadAborted as aborted:
                raise RoundFailure(aborted.cause if aborted.cause != "stalled" else "scheduler_stalled",
                                   aborted.phase, str(aborted)) from None
            after = await scrape(client, urls)
            try:
                info = (await client.get(target + "/server_info")).json()
            except (httpx.HTTPError, ValueError):
                info = {}
        notes = [f"attached to {target}"]
        if bench.warm_prompts > 0:
            notes.append(warm_note(warmed, bench.warm_prompts, 1.0))
        figures = bench_figures(load.outcomes, load.duration, accept_length=accept_length(info), slo=scenario.slo)
        deltas = counter_deltas(before, after)
        if (note := missing_note(deltas, len(urls))) is not None:
            notes.append(note)
        first_error = next((o.error for o in load.outcomes if not o.success), "")
        if figures.completed == 0:
            raise RoundFailure("requests_failed", "load", f"no request succeeded; first error: {first_error}")
        return measured(scenario, origin, figures, server_metrics(deltas, [], workers=len(urls)),  # type: ignore[arg-type]
                        request_samples(load.outcomes), attempted=len(requests), notes=notes,
                        first_error=first_error, invalid=json_failures(load.outcomes))
