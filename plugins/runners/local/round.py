"""One `local` round, phase by phase: validate, start, health, warm prompts, warm-up, load, teardown.

Before anything, the round ends what a dead owner's round left running (the process registry) and says so
in its notes. Every process is recorded in the registry before it is spawned; teardown runs whatever
happened (an error, a cancelled task): every process group is signalled and reaped before the round
returns, any member that had to be killed with SIGKILL is reported, and the record is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from plugins.runners.local.binds import bind_warnings
from plugins.runners.local.failures import RoundFailure, cause_from_log, dead_process, exited, refused_for_limits
from plugins.runners.local.launch import LaunchSpec, engine_of, plan_launch, process_env
from plugins.runners.local.lifetime import group_members
from plugins.runners.local.ports import busy_ports, worker_listeners
from plugins.runners.local.processes import Launcher, ServerProcess, stop_all
from plugins.runners.local.readiness import metadata, wait_healthy, wait_ports, wait_router
from plugins.runners.local.registry import RoundRegistry, end_orphans, state_dir
from plugins.runners.local.results import accept_length, failed, measured, provenance, warm_note
from plugins.runners.local.scrape import counter_deltas, missing_note, scrape, server_metrics
from service import (
    WARM_PROMPTS_SEED_OFFSET,
    LoadAborted,
    LoadPlan,
    PhaseResult,
    RequestSamples,
    RoundResult,
    RunnerSettings,
    Scenario,
    ServerMetrics,
    bench_figures,
    bench_serving_argv,
    bench_serving_warm_argv,
    build_prompts,
    json_failures,
    read_bench_output,
    read_cache_tiers,
    request_samples,
    resolve_model,
    run_load,
    sglang_available,
    write_bench_traces,
)

# How long a launch waits for a busy listener to free before it fails with port_in_use.
PORT_SETTLE_S = 2.0


def load_plan(scenario: Scenario, settings: RunnerSettings, base_url: str, seed: int | None, *,
              model: str | None = None, time_scale: float = 1.0) -> LoadPlan:
    """How to send the bench's requests to `base_url`, with the settings' phase deadlines.

    `model` is the name the server serves (default: the scenario's); `time_scale` (the emulator's wall seconds
    per emulated second) stretches open-loop arrivals, Poisson or a trace's, to the emulator's clock.
    """
    bench, deadlines = scenario.bench, settings.deadlines
    return LoadPlan(base_url=base_url, backend=bench.backend, model=model or scenario.model,
                    max_concurrency=bench.max_concurrency,
                    request_rate=bench.request_rate if bench.request_rate and bench.trace is None else None,
                    time_scale=time_scale,
                    ignore_eos=bench.ignore_eos, seed=bench.seed if seed is None else seed,
                    stall_timeout=deadlines.stall, warmup_deadline=deadlines.warmup,
                    warm_prompts_deadline=deadlines.warm_prompts, load_deadline=deadlines.load)


class LocalRound:
    """State of one round: the processes it started and what it has measured so far."""

    def __init__(self, scenario: Scenario, settings: RunnerSettings, launcher: Launcher, *, seed: int | None,
                 cost_model: str | None) -> None:
        self.scenario = scenario
        self.settings = settings
        self.launcher = launcher
        self.seed = seed
        self.cost_model = cost_model
        self.emulated = engine_of(settings) == "emulator" and not settings.engine_command
        self.scale = settings.time_scale if self.emulated else 1.0
        self.origin = provenance(scenario, emulated=self.emulated, cost_model=cost_model, time_scale=self.scale)
        self.processes: list[ServerProcess] = []
        self.launched: list[list[str]] = []
        self.log_dir = Path(settings.log_dir or tempfile.mkdtemp(prefix="sglang-tuner-round-"))
        self.notes: list[str] = [f"logs: {self.log_dir}"]
        self.server_info: dict[str, Any] = {}
        self.registry = RoundRegistry(state_dir(settings))

    @property
    def workers(self) -> list[ServerProcess]:
        """The worker processes, in launch order."""
        return [p for p in self.processes if p.kind == "worker"]

    async def run(self) -> RoundResult:
        """The whole round; never raises for a server fault (the result names it).

        The result's provenance lists every process the round started (`Provenance.processes`).
        """
        try:
            result = await self._run()
        finally:
            self._teardown()
        processes = self.registry.processes
        return msgspec.structs.replace(result, provenance=msgspec.structs.replace(result.provenance,
                                                                                  processes=processes))

    async def _run(self) -> RoundResult:
        try:
            self._end_orphans()
            self.notes.extend(bind_warnings(self.scenario, self.settings))
            _, specs = plan_launch(self.scenario, self.settings, cost_model=self.cost_model)
            if busy := await self._busy_ports(worker_listeners(specs)):
                raise RoundFailure("port_in_use", "start", f"already in use before launch: {', '.join(busy)}; "
                                                           "stop what holds it, or set remap_ports = true")
            async with httpx.AsyncClient(timeout=httpx.Timeout(10.0)) as client:
                await self._start(client, specs)
                return await self._measure(client)
        except RoundFailure as failure:
            return failed(failure, self.origin, self.notes)

    async def _busy_ports(self, listeners: list[tuple[str, int]]) -> list[str]:
        """The launch's listeners something holds, once a just-ended holder's sockets had `PORT_SETTLE_S` to go:
        the kernel can release a killed orphan's listener a moment after the process is gone."""
        deadline = time.monotonic() + PORT_SETTLE_S
        while (busy := busy_ports(self.scenario, listeners)) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return busy

    def _end_orphans(self) -> None:
        """End what a dead owner's round left running, before this round needs its GPUs and ports."""
        try:
            self.notes.extend(end_orphans(self.registry.path.parent))
        except OSError as exc:
            self.notes.append(f"orphans: the process registry {self.registry.path.parent} is unreadable ({exc})")

    # -- start and health ------------------------------------------------------------------------------

    def _spawn(self, spec: LaunchSpec) -> ServerProcess:
        self.launched.append(list(spec.argv))
        self._record(lambda: self.registry.planned(spec.name, spec.kind, spec.host, spec.port, spec.argv))
        try:
            process = self.launcher.spawn(spec.name, spec.argv, process_env(spec), self.log_dir / f"{spec.name}.log")
        except OSError as exc:
            raise RoundFailure("launch_exit", "start", f"{spec.name} could not be started: {exc}") from None
        process.url, process.kind = spec.url, spec.kind
        self.processes.append(process)
        self._record(lambda: self.registry.started(spec.name, process.pgid, process.started))
        return process

    def _record(self, write: Callable[[], None]) -> None:
        """Write the registry; a round whose processes cannot be recorded does not launch (any more of) them."""
        try:
            write()
        except OSError as exc:
            raise RoundFailure("validation", "start", f"the process registry {self.registry.path.parent} is not "
                                                      f"writable ({exc}); set the runner setting state_dir") from None

    async def _start(self, client: httpx.AsyncClient, specs: list[LaunchSpec]) -> None:
        deadlines = self.settings.deadlines
        for spec in specs:
            if spec.kind == "worker":
                self._spawn(spec)
        await wait_ports(self.processes, deadlines.start)
        await wait_healthy(client, self.processes, deadlines.health)
        heads = [p for p in self.workers if p.url]
        for process in heads:
            await metadata(client, process.url, "model_info")
            self.server_info = await metadata(client, process.url, "server_info")
        router = next((spec for spec in specs if spec.kind == "router"), None)
        if router is not None:
            process = self._spawn(router)
            await wait_ports(self.processes, deadlines.start)
            await wait_router(client, process, self.processes, len(heads), deadlines.health)

    # -- load --------------------------------------------------------------------------------------------

    def _watch(self) -> str | None:
        dead = dead_process(self.processes)
        return str(exited(dead, "load")) if dead is not None else None

    def _plan(self, base_url: str) -> LoadPlan:
        return load_plan(self.scenario, self.settings, base_url, self.seed,
                         model=self.server_info.get("served_model_name"), time_scale=self.scale)

    async def _measure(self, client: httpx.AsyncClient) -> RoundResult:
        router = next((p for p in self.processes if p.kind == "router"), None)
        base_url = router.url if router is not None else self.workers[0].url
        if self.settings.bench == "sglang":
            return await self._bench_serving(client, base_url)
        plan = self._plan(base_url)
        warm, requests = build_prompts(self.scenario.workload, self.scenario.bench,
                                       resolve_model(self.scenario.model), seed=plan.seed)
        offsets: list[int] = []
        before: list[dict[str, float] | None] = []

        async def between(load_client: httpx.AsyncClient) -> None:
            """After warm-up: flush the cache when asked, scrape metrics, mark the logs."""
            if self.scenario.bench.flush_cache:
                await load_client.post(base_url + "/flush_cache", params={"timeout": 60})
            before.extend(await scrape(load_client, [p.url for p in self.workers if p.url]))
            offsets.extend(p.log_size() for p in self.workers)

        try:
            warmed, load = await run_load(plan, warm, requests, between=between, watch=self._watch)
        except LoadAborted as aborted:
            raise await self._aborted(client, aborted) from None
        if self.scenario.bench.warm_prompts > 0:
            self.notes.append(warm_note(warmed, self.scenario.bench.warm_prompts, self.scale))
        if (dead := dead_process(self.processes)) is not None:  # requests can fail faster than the watchdog looks
            raise exited(dead, "load")
        after = await scrape(client, [p.url for p in self.workers if p.url])
        logs = [p.log_text(offset) for p, offset in zip(self.workers, offsets, strict=False)]
        server = self._server(counter_deltas(before, after), logs)
        return await self._result(client, load, len(requests), server)

    def _server(self, deltas: dict[str, float], logs: list[str]) -> ServerMetrics:
        workers = len([p for p in self.workers if p.url])
        if (note := missing_note(deltas, workers)) is not None:
            self.notes.append(note)
        return server_metrics(deltas, logs, workers=workers)

    async def _result(self, client: httpx.AsyncClient, load: PhaseResult, attempted: int,
                      server: ServerMetrics) -> RoundResult:
        heads = [p for p in self.workers if p.url]
        try:
            info = await metadata(client, heads[0].url, "server_info") if heads else {}
        except RoundFailure:
            info = {}  # only the accept length comes from here; the figures stand without it
        bench = bench_figures(load.outcomes, load.duration, time_scale=self.scale, accept_length=accept_length(info),
                              slo=self.scenario.slo)
        samples = request_samples(load.outcomes, time_scale=self.scale)
        first_error = next((o.error for o in load.outcomes if not o.success), "")
        if bench.completed == 0:
            cause = "requests_refused" if refused_for_limits(first_error) else "requests_failed"
            raise RoundFailure(cause, "load", f"no request succeeded; first error: {first_error}")
        limit = self.settings.retraction_storm_per_request * bench.completed
        if server.num_retracted_requests_total > limit:
            storm = RoundFailure("retraction_storm", "load",
                                 f"{server.num_retracted_requests_total} retractions for {bench.completed} requests "
                                 "(KV cache pool is full. Retract requests.); the KV pool is too small for this load")
            return failed(storm, self.origin, self.notes, bench=bench, server=server)
        return measured(self.scenario, self.origin, bench, server, samples, attempted=attempted, notes=self.notes,
                        first_error=first_error, invalid=json_failures(load.outcomes))

    async def _bench_serving(self, client: httpx.AsyncClient, base_url: str) -> RoundResult:
        """`--bench sglang`: SGLang's own bench_serving drives the load; its output file gives the figures.

        bench_serving has no flag for traffic served before the run, so `bench.warm_prompts` becomes a first
        pass with its own seed whose output file is discarded; the metrics scrape that starts the round's
        counter deltas comes after it.
        """
        if not sglang_available():
            raise RoundFailure("engine_missing", "load", "bench = sglang needs the sglang package installed here")
        bench = self.scenario.bench if self.seed is None else msgspec.structs.replace(self.scenario.bench,
                                                                                      seed=self.seed)
        model = self.server_info.get("served_model_name") or self.scenario.model
        served_trace, trace = write_bench_traces(bench, self.log_dir)
        warm_output = self.log_dir / "bench_serving_warm.jsonl"
        version = self.scenario.sglang_version
        warm_argv = bench_serving_warm_argv(self.settings.python, base_url, bench, self.scenario.workload,
                                            warm_output, model=model, trace_file=served_trace,
                                            sglang_version=version)
        if warm_argv is not None:
            code = await self._run_bench_serving(warm_argv, "bench_serving_warm.log", "warm_prompts",
                                                 self.settings.deadlines.warm_prompts)
            warm_output.unlink(missing_ok=True)  # served before the run: never part of the figures
            self.notes.append(f"warm_prompts: {bench.warm_prompts} prompts by a first bench_serving pass "
                              f"(seed {bench.seed + WARM_PROMPTS_SEED_OFFSET}, exit code {code}), output discarded")
        urls = [p.url for p in self.workers if p.url]
        before = await scrape(client, urls)
        offsets = [p.log_size() for p in self.workers]
        output = self.log_dir / "bench_serving.jsonl"
        argv = bench_serving_argv(self.settings.python, base_url, bench, self.scenario.workload, output, model=model,
                                  trace_file=trace, sglang_version=version, slo=self.scenario.slo)
        if trace is not None:
            self.notes.append("bench_serving's mooncake dataset builds each prompt from its hash ids (128 words an "
                              "id), not from the trace's input_length: its prompts are shorter than the trace's")
        await self._run_bench_serving(argv, "bench_serving.log", "load", self.settings.deadlines.load)
        try:
            figures = read_bench_output(output)
        except ValueError as exc:
            raise RoundFailure("requests_failed", "load", f"{exc}; see {self.log_dir / 'bench_serving.log'}") from None
        logs = [p.log_text(offset) for p, offset in zip(self.workers, offsets, strict=False)]
        server = self._server(counter_deltas(before, await scrape(client, urls)), logs)
        if server.cache_hit_rate_by_tier is None and (tiers := read_cache_tiers(output)) is not None:
            server = msgspec.structs.replace(server, cache_hit_rate_by_tier=tiers)
        return measured(self.scenario, self.origin, figures, server, RequestSamples(), attempted=figures.completed,
                        notes=[*self.notes, f"load by {' '.join(argv[:3])}"], first_error="")

    async def _run_bench_serving(self, argv: list[str], log_name: str, phase: str, deadline: float) -> int:
        """Run one bench_serving pass to its end (its output to `log_name`); its exit code."""
        with (self.log_dir / log_name).open("wb") as sink:
            child = await asyncio.create_subprocess_exec(*argv, stdout=sink, stderr=asyncio.subprocess.STDOUT,
                                                         start_new_session=True)
            try:
                async with asyncio.timeout(deadline):
                    return await child.wait()
            except asyncio.CancelledError:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()  # a cancelled round leaves no load running against its servers
                raise
            except TimeoutError:
                child.kill()
                await child.wait()
                raise RoundFailure("deadline", phase, f"bench_serving overran the {phase} deadline") from None

    async def _aborted(self, client: httpx.AsyncClient, aborted: LoadAborted) -> RoundFailure:
        """Name why the load stopped: a dead process, a watchdog line, or a scheduler that stopped stepping."""
        if aborted.cause not in ("stalled", "deadline"):
            cause, _, message = str(aborted).partition(": ")
            return RoundFailure(cause, aborted.phase, message)
        for process in self.workers:
            if cause_from_log(process.log_text()) == "watchdog_timeout":
                return RoundFailure("watchdog_timeout", aborted.phase, f"{process.name} logged a scheduler watchdog "
                                                                       f"timeout: {aborted}")
        if aborted.cause == "stalled":
            codes = [(await client.get(p.url + "/health")).status_code if p.url else 0 for p in self.workers]
            alive = "while /health still answers 200" if all(c == 200 for c in codes if c) else "and /health fails"
            return RoundFailure("scheduler_stalled", aborted.phase, f"the scheduler stopped {alive}: {aborted}")
        return RoundFailure("deadline", aborted.phase, str(aborted))

    # -- teardown ----------------------------------------------------------------------------------------

    def _teardown(self) -> None:
        started = time.monotonic()
        survivors = stop_all(self.processes, self.settings.deadlines.teardown)
        forced = {name: pids for name, pids in survivors.items() if pids}
        if forced:
            self.notes.append("teardown: SIGKILL after the grace period for " +
                              ", ".join(f"{name} ({len(pids)} process(es))" for name, pids in forced.items()))
        self.notes.append(f"teardown took {time.monotonic() - started:.2f}s")
        if any(group_members(p.pgid, since=p.started) for p in self.processes):
            self.notes.append(f"teardown: processes survived SIGKILL; {self.registry.path} keeps them for the "
                              "next round to end")
        else:
            self.registry.close()

