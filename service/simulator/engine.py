"""The discrete-event loop: a bench_serving client, routers and workers advancing step by step.

The client follows `benchmark/serving.py`: warm-up requests first (at the same concurrency, excluded),
then the measured requests, each sent when the `--max-concurrency` semaphore allows and, with a request
rate, no earlier than its Poisson arrival time; a trace's requests no earlier than their own arrival times
(`timed`). Events are whole scheduler steps, never tokens.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

import numpy as np

from service.domain import BenchSpec, Hardware
from service.simulator.cluster import Cluster, transfer_seconds
from service.simulator.grammar import POLL_INTERVAL_S
from service.simulator.requests import SimRequest, stamp_period
from service.simulator.worker import Worker

STEP_DONE: Final = 0
ARRIVAL: Final = 1
READY: Final = 2
TRANSFER_DONE: Final = 3
ADMIT: Final = 4
# (time, sequence, kind, payload): the kind tells the payload's type; the sequence breaks ties in push order.
_Event: TypeAlias = (
    tuple[float, int, Literal[0], Worker]
    | tuple[float, int, Literal[1], SimRequest]
    | tuple[float, int, Literal[2], tuple[int, int]]
    | tuple[float, int, Literal[3], tuple[SimRequest, Worker]]
    | tuple[float, int, Literal[4], tuple[SimRequest, int]]
)
MAX_EVENTS = 20_000_000


@dataclass
class Outcome:
    """What the loop produced for the aggregator."""

    measured: list[SimRequest]
    start: float = 0.0
    end: float = 0.0
    max_inflight: int = 0
    truncated: bool = False
    events: int = 0
    compile_seconds: list[float] = field(default_factory=list)


class EventLoop:
    """Runs warm-up then measured requests through a cluster."""

    def __init__(self, cluster: Cluster, bench: BenchSpec, hardware: Hardware, rng: np.random.Generator,
                 concurrency: int | None, request_rate: float | None, *, variable_period_s: float | None = None,
                 timed: bool = False) -> None:
        self.cluster = cluster
        self.bench = bench
        self.hardware = hardware
        self.rng = rng
        self.concurrency = concurrency
        self.rate = request_rate
        self.timed = timed
        self.variable_period_s = variable_period_s
        self.heap: list[_Event] = []
        self.seq = itertools.count()
        self.now = 0.0
        self.inflight = 0
        self.backlog: deque[SimRequest] = deque()
        self.unfinished = 0
        self.phase_left = 0
        self.outcome = Outcome(measured=[])
        self.entry = cluster.pools["prefill"] if cluster.is_pd else cluster.pools["unified"]
        self.decode = cluster.pools.get("decode")

    # -- client ---------------------------------------------------------------------------------------

    def run(self, warmup: list[SimRequest], measured: list[SimRequest]) -> Outcome:
        self._start_phase(warmup)
        self._drain(settle=True)
        self.cluster.recorder.measuring = True
        self.outcome.start = self.now
        if self.bench.flush_cache:
            for worker in self.cluster.all_workers():
                worker.cache.evict(worker.cache.evictable_tokens, self.now)
        self.outcome.measured = measured
        self._start_phase(measured)
        self._drain()
        self.outcome.end = self.now
        return self.outcome

    def _start_phase(self, requests: list[SimRequest]) -> None:
        self.phase_left = len(requests)
        if not requests:
            return
        if self.timed:  # every request at its own arrival, from the phase's start
            for r in requests:
                self._push((self.now + r.arrival, next(self.seq), ARRIVAL, r))
            return
        if self.rate and not requests[0].warmup:
            gaps = self.rng.exponential(1.0 / self.rate, size=len(requests))
            for r, t in zip(requests, self.now + np.cumsum(gaps), strict=True):
                self._push((float(t), next(self.seq), ARRIVAL, r))
            return
        for r in requests:
            self._offer(r)

    def _offer(self, r: SimRequest) -> None:
        limit = self.concurrency or math.inf
        if self.inflight < limit:
            self._issue(r)
        else:
            self.backlog.append(r)

    def _issue(self, r: SimRequest) -> None:
        self.inflight += 1
        self.outcome.max_inflight = max(self.outcome.max_inflight, self.inflight)
        r.issued = self.now
        if r.failure:  # refused before scheduling (`managers/tokenizer_manager.py` _validate_one_request)
            r.finish = self.now
            self.finished(r, self.now)
            return
        stamp_period(r, self.now, self.variable_period_s)
        w = self.entry.router.pick(r.blocks, self.now)
        if self.decode is not None:
            r.decode_worker = self.decode.router.pick(r.blocks, self.now)
        delay = self.entry.workers[w].setup.cost.frontend_seconds(r.input_len)
        if delay > 0:  # HTTP and tokenization before the scheduler sees it
            self._push((self.now + delay, next(self.seq), ADMIT, (r, w)))
        else:
            self._admit(r, w)

    def _admit(self, r: SimRequest, w: int) -> None:
        grammar = self.entry.grammar[w]
        if grammar is not None and r.schema >= 0 and not grammar.request(r, r.schema, self.now, not r.warmup):
            self._await_grammar(w)  # a cache miss waits in the grammar queue for its compile
        else:
            self._arrive(r, self.entry.workers[w])

    def _await_grammar(self, w: int) -> None:
        grammar = self.entry.grammar[w]
        assert grammar is not None
        done = grammar.next_done()
        if done is not None:
            self._push((max(done, self.now), next(self.seq), READY, (w, grammar.version)))

    def _grammar_ready(self, w: int, version: int) -> None:
        grammar = self.entry.grammar[w]
        assert grammar is not None
        if version != grammar.version:
            return  # a compile started or finished since: the pool re-timed its compiles
        for r in grammar.collect(self.now):  # each worker has its own grammar cache
            self._arrive(r, self.entry.workers[w])
        self._await_grammar(w)

    def _arrive(self, r: SimRequest, worker: Worker) -> None:
        # Under PD the router hands the request to a prefill and a decode server, and each one's tokenizer
        # manager checks it against its own request bound: the decode pool, sized apart, can be the smaller.
        refusal = worker.refusal(r)
        if refusal is None and self.decode is not None and r.decode_worker >= 0:
            refusal = self.decode.workers[r.decode_worker].refusal(r)
        if refusal is not None:
            r.worker = worker.setup.index
            r.aborted, r.failure = True, refusal
            self.finished(r, self.now)
            return
        worker.enqueue(r)
        self._kick(worker)

    def finished(self, r: SimRequest, now: float) -> None:
        """Worker callback: a request completed (or was aborted, or refused before reaching a worker)."""
        if r.worker >= 0:
            self.entry.router.done(r.worker)
        if self.decode is not None and r.decode_worker >= 0:
            self.decode.router.done(r.decode_worker)
        self.inflight -= 1
        self.phase_left -= 1
        if self.backlog:
            self._issue(self.backlog.popleft())

    # -- events ---------------------------------------------------------------------------------------

    def _push(self, event: _Event) -> None:
        heapq.heappush(self.heap, event)

    def _kick(self, worker: Worker) -> None:
        if worker.busy:
            return
        seconds = worker.start_step(self.now)
        grammar = self.entry.grammar[worker.setup.index] if worker.setup.role == self.entry.role else None
        if seconds is not None and grammar is not None and grammar.pending:
            # While a compile is pending, each scheduler iteration busy-polls for up to the poll interval
            # (grammar_manager.py get_ready_grammar_requests); the overlap scheduler hides it behind the GPU.
            seconds = max(seconds, POLL_INTERVAL_S)
        if seconds is not None:
            worker.step_started = self.now
            self._push((self.now + seconds, next(self.seq), STEP_DONE, worker))

    def _drain(self, settle: bool = False) -> None:
        while self.heap and (self.phase_left > 0 or settle):
            event = heapq.heappop(self.heap)
            self.now = event[0]
            self.outcome.events += 1
            if self.outcome.events > MAX_EVENTS:
                self.outcome.truncated = True
                return
            if event[2] == STEP_DONE:
                self._step_done(event[3])
            elif event[2] == ARRIVAL:
                self._offer(event[3])
            elif event[2] == READY:
                self._grammar_ready(*event[3])
            elif event[2] == TRANSFER_DONE:
                self._transfer_done(event[3])
            else:
                self._admit(*event[3])

    def _step_done(self, worker: Worker) -> None:
        rec = self.cluster.recorder
        rec.gauges(self.now - worker.step_started, worker.used_tokens / worker.res.pool_tokens,
                   worker.running.size, len(worker.waiting))
        leaving = worker.finish_step(self.now)
        for r in leaving:
            r.ready_at = self.now + transfer_seconds(r.input_len, self.entry, self.hardware)
            self._push((r.ready_at, next(self.seq), TRANSFER_DONE, (r, worker)))
        self._kick(worker)

    def _transfer_done(self, payload: tuple[SimRequest, Worker]) -> None:
        r, prefill_worker = payload
        prefill_worker.release_transfer(r, self.now)
        self._kick(prefill_worker)
        assert self.decode is not None
        target = self.decode.workers[r.decode_worker]
        target.enqueue(r)
        self._kick(target)
