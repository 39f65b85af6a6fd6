"""The simulator's worker model driven in scaled real time: one emulated SGLang scheduler.

The scheduler semantics (admission, chunked prefill, radix cache, retraction, speculative steps) are the
simulator's `Worker`; this adapter feeds it requests as they arrive over HTTP, sleeps through each step's
cost-model duration times the time scale, and publishes every request's token count after each step.
Emulated time runs `1 / time_scale` times faster than the wall clock; every figure the server reports
(metrics, log lines, meta_info latencies) is in emulated seconds, as the GPU would show them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from service.components import StepCostModel
from service.domain import Hardware, ModelSpec
from service.emulator.args import ServerArgs
from service.emulator.metrics import EngineMetrics
from service.emulator.tokens import blocks_of
from service.simulator.batch import Recorder
from service.simulator.experts import expert_balance
from service.simulator.memory import host_pool_tokens, request_bound, resolve_server
from service.simulator.radix import RadixCache
from service.simulator.requests import SimRequest
from service.simulator.speculative import speculative_settings
from service.simulator.step_cache import CachedStepCost
from service.simulator.worker import Worker, WorkerSetup

DEFAULT_DRAFT_ACCEPTANCE = 0.75
# How far (emulated seconds) the step clock may trail the wall clock before it jumps ahead: a starved
# process then shows up as a slower server instead of a burst of catch-up steps.
MAX_LAG_S = 0.25


@dataclass(eq=False)
class LiveRequest:
    """One HTTP request inside the engine: its simulator request and the channel its tokens go out on."""

    sim: SimRequest
    prompt_ids: list[int]
    arrived: float
    updates: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    published: int = 0
    first_token_at: float = -1.0
    finished_at: float = -1.0
    error: str | None = None


class EmulatedEngine:
    """A single scheduler (TP rank 0) of one emulated server."""

    def __init__(self, args: ServerArgs, model: ModelSpec, hardware: Hardware, cost: StepCostModel, *,
                 time_scale: float, log: Callable[[str], None], acceptance: float = DEFAULT_DRAFT_ACCEPTANCE,
                 pool_tokens: int | None = None, seed: int = 0) -> None:
        server = args.server
        resolved = resolve_server(model, hardware, server)  # raises ServerStartError like a failed start
        if pool_tokens is not None:
            # A small pool admitted optimistically (a low new-token ratio, as a small
            # --schedule-conservativeness gives) keeps running out of KV in decode: a retraction storm.
            resolved = dataclasses.replace(resolved, pool_tokens=pool_tokens, schedule_conservativeness=0.05)
        self.resolved = resolved
        self.args = args
        self.time_scale = max(time_scale, 1e-6)
        self.log = log
        self.role = args.disaggregation_mode
        self.recorder = Recorder(measuring=True)
        # Under EP the MoE share of each step waits for the busiest GPU rank, as the simulator prices it.
        self.balance = expert_balance(model, server)
        cached_cost = CachedStepCost(cost)
        setup = WorkerSetup(
            index=0, role="unified", resolved=resolved, cost=cached_cost,
            spec=speculative_settings(server, model, acceptance, args.version), mixed_chunk=server.enable_mixed_chunk,
            ignore_eos=pool_tokens is None, mask_seconds=0.0,
            step_factor=self.balance.step_factor(cached_cost.includes_expert_skew()) if self.balance else 1.0,
            host_link_bytes_per_s=hardware.spec.pcie_gbps * 1e9,
            prefill_decode_interval=int(args.get("prefill_decode_interval", 0) or 0),
            max_req_len=request_bound(model, resolved, args.get("context_length")))
        # One emulated server sees the host's free memory alone, as SGLang's check at its own start does.
        cache = RadixCache(page_size=resolved.page_size, enabled=not server.disable_radix_cache,
                           host_capacity=host_pool_tokens(resolved, server, hardware, 1.0),
                           write_policy=server.hicache_write_policy or "write_through")
        self.worker = Worker(setup, cache, self.recorder, np.random.default_rng(seed), self._finished)
        self.metrics = EngineMetrics(args, resolved.pool_tokens)
        self.live: dict[int, LiveRequest] = {}
        self._rids = itertools.count(1)
        self._t0 = time.monotonic()
        self._wake = asyncio.Event()
        self.stalled = False
        self._decode_steps = 0
        self._logged_tokens = 0
        self._logged_at = 0.0
        self._retractions_seen = 0

    # -- clock ----------------------------------------------------------------------------------------

    def now(self) -> float:
        """Emulated seconds since the engine started."""
        return (time.monotonic() - self._t0) / self.time_scale

    def wall_of(self, emulated: float) -> float:
        """The monotonic wall time at which emulated time `emulated` arrives."""
        return self._t0 + emulated * self.time_scale

    # -- requests -------------------------------------------------------------------------------------

    def submit(self, prompt_ids: list[int], max_new_tokens: int) -> LiveRequest:
        """Queue a request; its cumulative token counts then arrive on `updates` (None when finished)."""
        rid = next(self._rids)
        output = max(int(max_new_tokens), 1)
        if self.role == "prefill":
            output = 1  # a PD prefill server computes the prompt and its first token only
        ids = prompt_ids or [0]
        sim = SimRequest(rid=rid, blocks=blocks_of(ids), input_len=len(ids), output_len=output,
                         max_new_tokens=output)
        self.worker.refusal(sim)  # caps max_new_tokens to the pool; the app has refused a prompt it cannot hold
        live = LiveRequest(sim=sim, prompt_ids=ids, arrived=self.now())
        self.live[rid] = live
        self.metrics.on_arrival(len(ids))
        delay = self.worker.setup.cost.frontend_seconds(len(ids))  # nonzero only under a hidden perturbation
        if delay > 0:
            asyncio.get_running_loop().call_later(delay * self.time_scale, self._enqueue, sim)
        else:
            self._enqueue(sim)
        return live

    def _enqueue(self, sim: SimRequest) -> None:
        self.worker.enqueue(sim)
        self._wake.set()

    def queue_depth(self) -> tuple[int, int]:
        """(running, waiting) requests, as `/get_load` and the gauges report them."""
        return self.worker.running.size, len(self.worker.waiting) + (1 if self.worker.chunked else 0)

    def _finished(self, sim: SimRequest, now: float) -> None:
        live = self.live.get(sim.rid)
        if live is not None:
            live.finished_at = now
            if sim.aborted:
                live.error = sim.failure or "aborted"

    # -- the scheduler loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Step the worker forever: plan a batch, sleep its scaled duration, apply it, publish tokens."""
        cursor: float | None = None  # end of the previous step while the scheduler stays busy
        while True:
            if self.stalled:
                await asyncio.Event().wait()  # a dead scheduler never steps again
            # Back-to-back steps start where the last one ended, as on a GPU: this process's own overhead
            # between steps is not charged to the emulated server; sleeping to deadlines catches up.
            now = self.now() if cursor is None else max(cursor, self.now() - MAX_LAG_S)
            seconds = self.worker.start_step(now)
            if seconds is None:
                cursor = None
                self._wake.clear()
                await self._wake.wait()
                continue
            plan = self.worker.plan
            end = now + seconds
            await asyncio.sleep(max(0.0, self.wall_of(end) - time.monotonic()))
            if self.stalled:
                continue
            self.worker.finish_step(end)
            self._report(plan, end)
            self._publish(end)
            cursor = end

    def _report(self, plan: object, end: float) -> None:
        kind, batch, _mixed = plan if isinstance(plan, tuple) else ("idle", [], False)
        running, waiting = self.queue_depth()
        usage = self.worker.used_tokens / max(self.resolved.pool_tokens, 1)
        if kind == "prefill":
            new = sum(take for _, take in batch)
            fresh = [r for r, take in batch if r.extended == take]  # the first chunk of each request
            cached = sum(r.prefix_len for r in fresh)
            self.metrics.on_prefill(new, cached, usage, running, waiting)
            self.metrics.on_forward_pass("extend", self.balance)
            self.log(f"Prefill batch, #new-seq: {len(batch)}, #new-token: {new}, #cached-token: {cached}, "
                     f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {waiting}, "
                     f"#pending-token: 0, cuda graph: False, input throughput (token/s): 0.00")
        else:
            self._decode_steps += 1
            self.metrics.on_decode(usage, running, waiting)
            self.metrics.on_forward_pass("decode", self.balance)
            if self._decode_steps % max(int(self.args.get("decode_log_interval", 40) or 40), 1) == 0:
                self._log_decode(end, usage, running, waiting)
        self._report_retractions()

    def _log_decode(self, end: float, usage: float, running: int, waiting: int) -> None:
        generated = self.metrics.generation_tokens
        elapsed = max(end - self._logged_at, 1e-9)
        throughput = (generated - self._logged_tokens) / elapsed
        self._logged_tokens, self._logged_at = generated, end
        self.metrics.gen_throughput = throughput
        accept = ""
        if self.recorder.spec_steps:
            length = self.recorder.spec_emitted / self.recorder.spec_steps
            rate = (length - 1) / max(self.worker.setup.spec.max_accept - 1, 1) if self.worker.setup.spec else 0.0
            self.metrics.spec_accept_length = length
            accept = f"accept len: {length:.2f}, accept rate: {rate:.2f}, "
        self.log(f"Decode batch, #running-req: {running}, #token: {self.worker.used_tokens}, "
                 f"token usage: {usage:.2f}, {accept}cuda graph: True, gen throughput (token/s): {throughput:.2f}, "
                 f"#queue-req: {waiting}")

    def _report_retractions(self) -> None:
        total = self.recorder.retractions
        if total > self._retractions_seen:
            count = total - self._retractions_seen
            self._retractions_seen = total
            self.metrics.on_retraction(count)
            self.log(f"KV cache pool is full. Retract requests. #retracted_reqs: {count}, #new_tokens_gained: 0, "
                     f"#new_token_ratio: {self.worker.ratio_init:.4f} -> {self.worker.ratio:.4f}")
        # The recorder's latency samples are for offline rounds; a long-lived server must not keep them.
        self.recorder.itl_values.clear()
        self.recorder.itl_weights.clear()
        self.recorder.itl_groups.clear()

    def _publish(self, now: float) -> None:
        worker = self.worker
        for rid, live in list(self.live.items()):
            sim = live.sim
            count = int(worker.running.gen[sim.slot]) if sim.slot >= 0 else sim.generated
            if count > live.published:
                if live.published == 0:
                    live.first_token_at = now
                    self.metrics.on_first_token(sim, now - live.arrived)
                self.metrics.on_tokens(count - live.published)
                live.published = count
                live.updates.put_nowait(count)
            if live.finished_at >= 0:
                self.metrics.on_finished(live, now)
                live.updates.put_nowait(None)
                del self.live[rid]

    def flush_cache(self) -> bool:
        """Drop every unlocked cached prefix; refused (False) while requests run or wait, as SGLang does."""
        running, waiting = self.queue_depth()
        if running or waiting:
            self.log(f"Cache not flushed because there are pending requests. #queue-req: {waiting}, "
                     f"#running-req: {running}")
            return False
        cache = self.worker.cache
        cache.evict(cache.evictable_tokens, self.now())
        self.log("Cache flushed successfully!")
        return True
