"""One `ray` round: reserve, place, start, measure, tear down; every failure names its cause and phase.

The placement group is created first (a pending one waits for the `placement` deadline while other rounds
hold the cluster), then one actor per worker process in its bundle and one for the router beside the first
worker, each owning its process. The load runs from a task placed in the router's bundle. Teardown runs
whatever happened, a cancelled task included: every process is stopped by its actor, every actor killed,
the placement group removed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import msgspec

from plugins.runners.local.failures import RoundFailure, refused_for_limits
from plugins.runners.local.launch import LaunchSpec, engine_of, plan_launch
from plugins.runners.local.results import accept_length, failed, measured, provenance, warm_note
from plugins.runners.local.scrape import counter_deltas, missing_note, server_metrics
from plugins.runners.ray.argv import Endpoint, place_argv, uses_ray
from plugins.runners.ray.cluster import bundles, gpu_nodes, import_ray, shortfall, strategy
from plugins.runners.ray.ports import PortBook
from service import (
    PlacedWorker,
    PlacementRecord,
    ProcessRecord,
    RequestSamples,
    RoundResult,
    RunnerSettings,
    Scenario,
    ServerMetrics,
    bench_figures,
    json_failures,
    place_workers,
    request_samples,
)

WATCH_S = 0.5


async def _call(ref: Any, timeout: float | None = None) -> Any:
    async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it drops a cancel that lands as the ref resolves
        return await asyncio.wrap_future(ref.future())


def _failure(found: dict[str, str]) -> RoundFailure:
    return RoundFailure(found["cause"], found["phase"], found["message"])


class RayRound:
    """State of one round: its placement group, its actors and what they report."""

    def __init__(self, scenario: Scenario, settings: RunnerSettings, ports: PortBook, *, seed: int | None,
                 cost_model: str | None) -> None:
        self.scenario, self.settings, self.ports, self.seed = scenario, settings, ports, seed
        self.cost_model = cost_model
        self.emulated = engine_of(settings) == "emulator" and not settings.engine_command
        self.scale = settings.time_scale if self.emulated else 1.0
        self.origin = provenance(scenario, emulated=self.emulated, cost_model=cost_model, time_scale=self.scale,
                                 runner="ray")
        self.round_id = uuid.uuid4().hex[:12]
        self.ray = import_ray()
        self.pg: Any = None
        self.actors: list[tuple[LaunchSpec, Any]] = []
        self.spawned: list[Any] = []
        self.placement: list[PlacementRecord] = []
        self.processes: list[ProcessRecord] = []
        self.notes: list[str] = []
        self.launched: list[list[str]] = []

    async def run(self) -> RoundResult:
        """The whole round; never raises for a cluster or server fault (the result names it)."""
        try:
            try:
                result = await self._run()
            except RoundFailure as failure:
                result = failed(failure, self.origin, self.notes)
            except TimeoutError:
                result = failed(RoundFailure("start_timeout", "start", "an actor of the round did not answer within "
                                                                       "the start deadline"), self.origin, self.notes)
            except self.ray.exceptions.RayError as exc:
                result = failed(RoundFailure("worker_died", "start", f"an actor of the round is gone: {_short(exc)}"),
                                self.origin, self.notes)
        finally:
            teardown = asyncio.ensure_future(self._teardown())
            cancelled = False
            while not teardown.done():
                try:
                    await asyncio.shield(teardown)
                except asyncio.CancelledError:
                    cancelled = True  # the round's processes end before the cancellation goes on
            if cancelled:
                raise asyncio.CancelledError
        origin = msgspec.structs.replace(result.provenance, placement=self.placement, processes=self.processes)
        return msgspec.structs.replace(result, provenance=origin, notes=self.notes)

    async def _run(self) -> RoundResult:
        rendered, specs = plan_launch(self.scenario, self.settings, cost_model=self.cost_model)
        placed = place_workers(self.scenario.deployment, self.scenario.hardware)
        sizes, bundle_of = bundles(self.scenario)
        if (why := shortfall(sizes, gpu_nodes())) is not None:
            raise RoundFailure("insufficient_resources", "placement", why)
        await self._reserve(sizes)
        workers = [spec for spec in specs if spec.kind == "worker"]
        pairs = [(spec, worker) for spec, worker in zip(workers, placed, strict=True)
                 if not (worker.node_rank and uses_ray(spec))]  # --use-ray: SGLang starts the other ranks itself
        actors = [self._actor(spec, worker, bundle_of[worker.node]) for spec, worker in pairs]
        router = next((spec for spec in specs if spec.kind == "router"), None)
        router_actor = self._actor(router, None, 0) if router is not None else None
        endpoints, router_at, metrics_port = await self._listeners(pairs, actors, router_actor)
        launching = [spec for spec, _ in pairs] + ([router] if router is not None else [])
        final = place_argv(launching, [w for _, w in pairs], _only(rendered, pairs), endpoints, router_at, metrics_port,
                           self.scenario, self.settings)
        self.actors = list(zip(final, actors + ([router_actor] if router_actor is not None else []), strict=True))
        await self._start([pair for pair in self.actors if pair[0].kind == "worker"])
        if router_actor is not None:
            heads = len([spec for spec, _ in self.actors if spec.kind == "worker" and spec.url])
            await self._start([pair for pair in self.actors if pair[0].kind == "router"], workers=heads)
        return await self._measure()

    # -- placement ---------------------------------------------------------------------------------------

    async def _reserve(self, sizes: list[int]) -> None:
        from ray.util.placement_group import placement_group, placement_group_table

        self.pg = placement_group([{"GPU": float(size)} for size in sizes], strategy=strategy(sizes),
                                  name=f"sglang-tuner-{self.round_id}")
        started = time.monotonic()
        deadline = self.settings.deadlines.placement
        try:
            await _call(self.pg.ready(), deadline)
        except TimeoutError:
            raise RoundFailure("placement_timeout", "placement",
                               f"the placement group ({len(sizes)} bundle(s) of {sizes} GPUs, {strategy(sizes)}) "
                               f"was not placed within {deadline:.0f}s; the cluster is busy") from None
        waited = time.monotonic() - started
        nodes = placement_group_table(self.pg)["bundles_to_node_id"]
        self.notes.append(f"placement group {self.pg.id.hex()[:12]} ({strategy(sizes)}) ready in {waited:.1f}s on "
                          f"node(s) {', '.join(str(nodes[i])[:12] for i in sorted(nodes))}")

    def _actor(self, spec: LaunchSpec, worker: PlacedWorker | None, bundle: int) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from plugins.runners.ray.actors import ProcessActor

        gpus = len(worker.gpus) if worker is not None and not uses_ray(spec) else 0
        where = PlacementGroupSchedulingStrategy(placement_group=self.pg, placement_group_bundle_index=bundle)
        actor = ProcessActor.options(num_gpus=gpus, scheduling_strategy=where).remote(spec.name, spec.kind)
        self.spawned.append(actor)
        return actor, bundle

    async def _listeners(self, pairs: list[tuple[LaunchSpec, PlacedWorker]], actors: list[Any],
                         router: Any) -> tuple[list[Endpoint], Endpoint | None, int | None]:
        """Ask each actor where it runs, then take free ports on its node for every listener."""
        everyone = actors + ([router] if router is not None else [])
        infos = await asyncio.gather(*(_call(actor.info.remote(), self.settings.deadlines.start)
                                       for actor, _ in everyone))
        for (spec, _), (_, bundle), info in zip(pairs, actors, infos, strict=False):
            self.placement.append(PlacementRecord(worker=spec.name, node_id=info["node_id"], node_ip=info["node_ip"],
                                                  gpus=info["gpus"], placement_group=self.pg.id.hex(), bundle=bundle))
        endpoints = []
        async with self.ports.lock:
            for (spec, worker), (actor, _), info in zip(pairs, actors, infos, strict=False):
                wanted = 1 + ("--disaggregation-bootstrap-port" in spec.argv) + \
                    (worker.nnodes > 1 and worker.node_rank == 0)
                got = await _call(actor.free_ports.remote(wanted, self.ports.taken(info["node_ip"])))
                self.ports.hold(self.round_id, info["node_ip"], got)
                bootstrap = got[1] if "--disaggregation-bootstrap-port" in spec.argv else None
                dist = got[-1] if worker.nnodes > 1 and worker.node_rank == 0 else None
                endpoints.append(Endpoint(info["node_ip"], got[0], bootstrap=bootstrap, dist_port=dist))
            if router is None:
                return endpoints, None, None
            info = infos[-1]
            got = await _call(router[0].free_ports.remote(2, self.ports.taken(info["node_ip"])))
            self.ports.hold(self.round_id, info["node_ip"], got)
        return endpoints, Endpoint(info["node_ip"], got[0]), got[1]

    # -- start -------------------------------------------------------------------------------------------

    async def _start(self, pairs: list[tuple[LaunchSpec, tuple[Any, int]]], workers: int = 0) -> None:
        deadlines = self.settings.deadlines
        log_dir = self.settings.log_dir
        for spec, (actor, _) in pairs:
            self.launched.append(list(spec.argv))
            env = dict(spec.env)
            if uses_ray(spec):
                env["RAY_ADDRESS"] = self.ray.get_runtime_context().gcs_address
            started = await _call(actor.start.remote(spec.argv, env, log_dir), deadlines.start)
            info = next((p for p in self.placement if p.worker == spec.name), None)
            self.processes.append(ProcessRecord(name=spec.name, kind=spec.kind, pid=started["pid"],
                                                pgid=started["pgid"], start_time=started["start_time"],
                                                host=spec.host, port=spec.port, argv=list(spec.argv)))
            where = f"node {info.node_id[:12]} " if info is not None else ""
            self.notes.append(f"logs: {spec.name}: {where}{started['log']}")
        path = "/readiness" if workers else "/health"
        waits = asyncio.gather(*(_call(actor.wait_ready.remote(spec.url, path, deadlines.start + deadlines.health,
                                                               workers))
                                 for spec, (actor, _) in pairs), return_exceptions=True)
        found = await self._watch(waits, "health")
        for (spec, _), outcome in zip(pairs, found, strict=True):
            if isinstance(outcome, BaseException):
                raise RoundFailure("worker_died", "health", f"{spec.name}'s actor is gone: {_short(outcome)}")
            if outcome is not None:
                raise _failure(outcome)

    # -- load --------------------------------------------------------------------------------------------

    async def _measure(self) -> RoundResult:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from plugins.runners.ray.actors import measure_task

        workers = [(spec, actor) for spec, (actor, _) in self.actors if spec.kind == "worker"]
        router = next((spec for spec, _ in self.actors if spec.kind == "router"), None)
        heads = [spec.url for spec, _ in workers if spec.url]
        base_url = router.url if router is not None else heads[0]
        beside = next(bundle for spec, (_, bundle) in self.actors if spec.kind == ("router" if router else "worker"))
        request = {"scenario": self.scenario, "settings": self.settings, "heads": heads, "base_url": base_url,
                   "seed": self.seed, "time_scale": self.scale, "log_dir": self.settings.log_dir}
        where = PlacementGroupSchedulingStrategy(placement_group=self.pg, placement_group_bundle_index=beside)
        ref = measure_task.options(scheduling_strategy=where).remote(request, [actor for _, actor in workers])
        try:
            out = dict(await self._watch(asyncio.wrap_future(ref.future()), "load"))
        except self.ray.exceptions.RayError as exc:
            raise RoundFailure("worker_died", "load", f"the load task beside the router was lost: "
                                                      f"{_short(exc)}") from None
        finally:
            if not ref.future().done():
                self.ray.cancel(ref, force=True)
        if "failure" in out:
            raise _failure(out["failure"])
        logs = await asyncio.gather(*(_call(actor.log_text.remote(offset), 30.0)
                                      for (_, actor), offset in zip(workers, out["offsets"], strict=False)))
        deltas = counter_deltas(out["before"], out["after"])
        if (note := missing_note(deltas, len(heads))) is not None:
            self.notes.append(note)
        server = server_metrics(deltas, list(logs), workers=len(heads))
        if "figures" in out:
            if server.cache_hit_rate_by_tier is None and out["tiers"] is not None:
                server = msgspec.structs.replace(server, cache_hit_rate_by_tier=out["tiers"])
            self.notes.append(f"load by {' '.join(out['argv'][:3])}")
            return measured(self.scenario, self.origin, out["figures"], server, RequestSamples(),
                            attempted=out["figures"].completed, notes=self.notes, first_error="")
        return self._result(out, server)

    async def _watch(self, waiting: asyncio.Future[Any], phase: str) -> Any:
        """What `waiting` gives; meanwhile a started process or actor that died fails the round at once."""
        ray = self.ray
        started = {p.name for p in self.processes}
        while True:
            ready, _ = await asyncio.wait({waiting}, timeout=WATCH_S)
            if ready:
                return waiting.result()
            for spec, (actor, _) in self.actors:
                if spec.name not in started:
                    continue
                try:
                    dead = await _call(actor.poll.remote(phase), 30.0)
                except (ray.exceptions.RayError, TimeoutError) as exc:
                    waiting.cancel()
                    node = next((p.node_id[:12] for p in self.placement if p.worker == spec.name), "?")
                    raise RoundFailure("worker_died", phase, f"{spec.name}'s actor on node {node} is gone (its node "
                                                             f"died or it was killed): {_short(exc)}") from None
                if dead is not None:
                    waiting.cancel()
                    raise _failure(dead)

    def _result(self, out: dict[str, Any], server: ServerMetrics) -> RoundResult:
        load = out["load"]
        bench = bench_figures(load.outcomes, load.duration, time_scale=self.scale,
                              accept_length=accept_length(out["server_info"]), slo=self.scenario.slo)
        if self.scenario.bench.warm_prompts > 0:
            self.notes.append(warm_note(out["warmed"], self.scenario.bench.warm_prompts, self.scale))
        first_error = next((o.error for o in load.outcomes if not o.success), "")
        if bench.completed == 0:
            cause = "requests_refused" if refused_for_limits(first_error) else "requests_failed"
            raise RoundFailure(cause, "load", f"no request succeeded; first error: {first_error}")
        limit = self.settings.retraction_storm_per_request * bench.completed
        if server.num_retracted_requests_total > limit:
            storm = RoundFailure("retraction_storm", "load", f"{server.num_retracted_requests_total} retractions for "
                                                             f"{bench.completed} requests; the KV pool is too small")
            return failed(storm, self.origin, self.notes, bench=bench, server=server)
        return measured(self.scenario, self.origin, bench, server, request_samples(load.outcomes,
                                                                                   time_scale=self.scale),
                        attempted=out["attempted"], notes=self.notes, first_error=first_error,
                        invalid=json_failures(load.outcomes))

    # -- teardown ----------------------------------------------------------------------------------------

    async def _teardown(self) -> None:
        started = time.monotonic()
        ray, grace = self.ray, self.settings.deadlines.teardown
        stops = [actor.stop.remote(grace) for _, (actor, _) in reversed(self.actors)]
        outcomes = await asyncio.gather(*(_call(ref, grace + 15.0) for ref in stops), return_exceptions=True)
        forced = [spec.name for (spec, _), got in zip(reversed(self.actors), outcomes, strict=True)
                  if isinstance(got, list) and got]
        if forced:
            self.notes.append(f"teardown: SIGKILL after the grace period for {', '.join(forced)}")
        for actor in self.spawned:
            ray.kill(actor, no_restart=True)
        if self.pg is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.pg)
        self.ports.release(self.round_id)
        self.notes.append(f"teardown took {time.monotonic() - started:.2f}s (actors killed, placement group removed)")


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"


def _only(rendered: Any, pairs: list[tuple[LaunchSpec, PlacedWorker]]) -> Any:
    """The rendered launch restricted to the worker processes this round starts (same order)."""
    names = {spec.name for spec, _ in pairs}
    keep = [w for w in rendered.workers
            if f"{w.group}-{w.replica}" + (f"-rank{w.node_rank}" if w.node_rank else "") in names]
    return msgspec.structs.replace(rendered, workers=keep)
