"""The round's load, from a Ray task placed beside the router: metadata, warm-up, scrape, load, scrape.

It runs what the `local` runner's measurement runs (the built-in load generator, or SGLang's bench_serving
with `bench = "sglang"`), and scrapes every worker with the same module (`plugins.runners.local.scrape`),
so the figures and their rules are the same. Everything it returns is plain data for the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import msgspec

from plugins.runners.local.failures import RoundFailure
from plugins.runners.local.readiness import metadata
from plugins.runners.local.round import load_plan
from plugins.runners.local.scrape import scrape
from service import (
    LoadAborted,
    bench_serving_argv,
    build_prompts,
    read_bench_output,
    read_cache_tiers,
    resolve_model,
    run_load,
    sglang_available,
)


async def _call(ref: Any) -> Any:
    return await asyncio.wrap_future(ref.future())


async def measure(request: dict[str, Any], workers: list[Any]) -> dict[str, Any]:
    """Measure one round; `workers` are the worker actors (for log offsets), `request` what to send where.

    Returns `{"failure": {cause, phase, message}}` or the phases' outcomes and the two scrapes.
    """
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0)) as client:
            info: dict[str, Any] = {}
            for url in request["heads"]:
                await metadata(client, url, "model_info")
                info = await metadata(client, url, "server_info")
            if request["settings"].bench == "sglang":
                return await _bench_serving(request, workers, client, info)
            return await _builtin(request, workers, client, info)
    except RoundFailure as failure:
        return {"failure": {"cause": failure.cause, "phase": failure.phase, "message": failure.message}}


async def _builtin(request: dict[str, Any], workers: list[Any], client: httpx.AsyncClient,
                   info: dict[str, Any]) -> dict[str, Any]:
    scenario, settings, heads = request["scenario"], request["settings"], request["heads"]
    plan = load_plan(scenario, settings, request["base_url"], request["seed"], model=info.get("served_model_name"),
                     time_scale=request["time_scale"])
    warm, requests = build_prompts(scenario.workload, scenario.bench, resolve_model(scenario.model), seed=plan.seed)
    before: list[dict[str, float] | None] = []
    offsets: list[int] = []

    async def between(load_client: httpx.AsyncClient) -> None:
        """After warm-up: flush the cache when asked, scrape metrics, mark the logs."""
        if scenario.bench.flush_cache:
            await load_client.post(request["base_url"] + "/flush_cache", params={"timeout": 60})
        before.extend(await scrape(load_client, heads))
        offsets.extend(await asyncio.gather(*(_call(actor.log_size.remote()) for actor in workers)))

    try:
        warmed, load = await run_load(plan, warm, requests, between=between)
    except LoadAborted as aborted:
        return {"failure": await _aborted(aborted, workers, client, heads)}
    after = await scrape(client, heads)
    try:
        info = await metadata(client, heads[0], "server_info") if heads else {}
    except RoundFailure:
        pass  # only the accept length comes from here; the figures stand without it
    return {"warmed": warmed, "load": load, "attempted": len(requests), "before": before, "after": after,
            "offsets": offsets, "server_info": info}


async def _aborted(aborted: LoadAborted, workers: list[Any], client: httpx.AsyncClient,
                   heads: list[str]) -> dict[str, str]:
    """Why the load stopped: a watchdog line in a log, a scheduler that stopped stepping, or a deadline."""
    if aborted.cause not in ("stalled", "deadline"):
        cause, _, message = str(aborted).partition(": ")
        return {"cause": cause, "phase": aborted.phase, "message": message}
    causes = await asyncio.gather(*(_call(actor.log_cause.remote()) for actor in workers))
    if "watchdog_timeout" in causes:
        return {"cause": "watchdog_timeout", "phase": aborted.phase,
                "message": f"a worker logged a scheduler watchdog timeout: {aborted}"}
    if aborted.cause == "stalled":
        codes = []
        for url in heads:
            try:
                codes.append((await client.get(url + "/health")).status_code)
            except httpx.HTTPError:
                codes.append(0)
        alive = "while /health still answers 200" if all(code == 200 for code in codes) else "and /health fails"
        return {"cause": "scheduler_stalled", "phase": aborted.phase,
                "message": f"the scheduler stopped {alive}: {aborted}"}
    return {"cause": "deadline", "phase": aborted.phase, "message": str(aborted)}


async def _bench_serving(request: dict[str, Any], workers: list[Any], client: httpx.AsyncClient,
                         info: dict[str, Any]) -> dict[str, Any]:
    """`bench = "sglang"`: SGLang's own bench_serving drives the load from this node; its output file gives
    the figures (traffic served before the run, `bench.warm_prompts`, is not sent on this path)."""
    scenario, settings, heads = request["scenario"], request["settings"], request["heads"]
    if not sglang_available():
        raise RoundFailure("engine_missing", "load", "bench = sglang needs the sglang package installed on the "
                                                     "router's node")
    bench = scenario.bench if request["seed"] is None else msgspec.structs.replace(scenario.bench,
                                                                                    seed=request["seed"])
    folder = Path(request["log_dir"] or tempfile.mkdtemp(prefix="sglang-tuner-ray-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    output = folder / "bench_serving.jsonl"
    argv = bench_serving_argv(settings.python, request["base_url"], bench, scenario.workload, output,
                              model=info.get("served_model_name") or scenario.model,
                              sglang_version=scenario.sglang_version, slo=scenario.slo)
    before = await scrape(client, heads)
    offsets = await asyncio.gather(*(_call(actor.log_size.remote()) for actor in workers))
    with (folder / "bench_serving.log").open("wb") as sink:
        child = await asyncio.create_subprocess_exec(*argv, stdout=sink, stderr=subprocess.STDOUT,
                                                     start_new_session=True)
        try:
            async with asyncio.timeout(settings.deadlines.load):
                await child.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                child.kill()  # a cancelled round leaves no load running against its servers
            raise
        except TimeoutError:
            child.kill()
            await child.wait()
            raise RoundFailure("deadline", "load", "bench_serving overran the load deadline") from None
    try:
        figures = read_bench_output(output)
    except ValueError as exc:
        raise RoundFailure("requests_failed", "load", f"{exc}; see {folder / 'bench_serving.log'}") from None
    after = await scrape(client, heads)
    return {"figures": figures, "tiers": read_cache_tiers(output), "before": before, "after": after,
            "offsets": list(offsets), "server_info": info, "argv": argv}
