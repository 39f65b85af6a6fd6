"""Structured output: grammar compilation, the grammar caches, and prompt-only failures.

What SGLang 0.5.23 does with a request that carries a JSON schema (`srt/constrained/`):

- `grammar_manager.py` process_req_with_grammar asks the backend for the schema's grammar;
  `base_grammar_backend.py` get_cached_or_future_value returns a copy from `self.cache` on a hit, and
  otherwise submits a compile of its own to the backend's `ThreadPoolExecutor()` (default max_workers =
  min(32, os.cpu_count() + 4)) and puts the request in the grammar queue (`sglang:num_grammar_queue_reqs`).
- The cache holds only finished grammars: set_cache runs in get_ready_grammar_requests once a future is
  done, so requests arriving while a schema compiles each submit their own compile.
- xgrammar's GrammarCompiler (xgrammar 0.2.7, SGLang builds it with the defaults: max_threads=8,
  cache_enabled=True, unlimited) keeps its own cache keyed by schema whose entry is a shared future
  (`cpp/support/thread_safe_cache.h` GetFutureUnlimited): a second compile of a schema already compiling
  waits for the first, and one compiled returns at once. Its compile releases the GIL
  (`cpp/nanobind/nanobind.cc`: compile_json_schema has `gil_scoped_release`) and precomputes masks on up
  to 8 threads, so compiles of different schemas run side by side on the host's cores and slow each other
  down when they outnumber them. llguidance and outlines keep no such cache: every submitted compile runs.
- Every TP rank runs its own scheduler with its own backend, and a request leaves the grammar queue only
  when every rank's grammar is ready (all_gather, then intersection): each rank compiles every schema.
- The scheduler moves ready requests to the waiting queue when it builds the next prefill batch
  (scheduler.py _get_new_batch_prefill_raw), busy-polling up to SGLANG_GRAMMAR_POLL_INTERVAL (5 ms,
  `srt/environ.py`) while a compile is pending; the overlap scheduler hides that poll behind the GPU step.

Not modelled: the grammar timeout (SGLANG_GRAMMAR_MAX_POLL_ITERATIONS, 10,000 scheduler iterations of at
least the 5 ms poll, so 50 s or more), which xgrammar and llguidance never reach but outlines' minute-long
compiles can; such requests would abort and their schema's cache entry would hold the failure.

Jump-forward helpers exist on the grammar objects (base_grammar_backend.py try_jump_forward) but nothing in
`srt/managers/` calls them in 0.5.23, so constrained decoding emits every token through the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from service.domain import StructuredOutput
from service.simulator.requests import SimRequest

# Compile time per new schema alone on the host (median s, p95 s): casebook case 4's backend table
# (xgrammar 40-400 ms, llguidance almost none, outlines 40 s to minutes for complex schemas).
COMPILE_SECONDS: dict[str, tuple[float, float]] = {
    "xgrammar": (0.15, 0.40),
    "llguidance": (0.002, 0.006),
    "outlines": (60.0, 300.0),
}
# Seeds the complexity of each schema of a workload: a schema compiles in the same time in every round and on
# every backend's scale (the casebook's log: 384 ms and 411 ms for two of its schemas).
SCHEMA_COMPLEXITY_SEED = 4_417
# Threads one compile keeps busy: xgrammar's GrammarCompiler max_threads default (python/xgrammar/compiler.py);
# llguidance and outlines build on the calling thread.
COMPILE_THREADS: dict[str, int] = {"xgrammar": 8, "llguidance": 1, "outlines": 1}
# Backends whose compiler shares an in-flight compile of the same schema (thread_safe_cache.h).
SHARES_INFLIGHT_COMPILE = frozenset({"xgrammar"})
# concurrent.futures.ThreadPoolExecutor() default: min(32, os.cpu_count() + 4).
EXECUTOR_MAX_WORKERS = 32
# SGLANG_GRAMMAR_POLL_INTERVAL (`srt/environ.py`): the longest busy-poll per scheduler iteration.
POLL_INTERVAL_S = 0.005
# Host processes that keep a core busy besides the compiles: the tokenizer manager and the detokenizer
# (plus one scheduler per TP rank, counted per server).
BUSY_HOST_PROCESSES = 2
# Per request and decode step, the share of mask work not hidden behind the GPU (casebook: < 40 us/token
# for xgrammar, ~50 us for llguidance, one lookup for outlines; mostly overlapped with the forward).
MASK_SECONDS: dict[str, float] = {"xgrammar": 8e-6, "llguidance": 12e-6, "outlines": 2e-6}
# Casebook case 4, round 0: 187 failures in 5,000 requests split 87 parse / 61 enum / 28 required / 11 type.
FAILURE_KINDS: dict[str, float] = {"parse": 87 / 187, "enum": 61 / 187, "required": 28 / 187, "type": 11 / 187}


def solo_compile_seconds(backend: str, schema: int) -> float:
    """How long `schema` takes to compile alone on the host: a fixed property of the schema (its quantile
    in the backend's compile-time distribution), not a new draw per round or seed."""
    median, p95 = COMPILE_SECONDS.get(backend, COMPILE_SECONDS["xgrammar"])
    sigma = max(np.log(p95 / median) / 1.645, 1e-3)
    z = np.random.default_rng([SCHEMA_COMPLEXITY_SEED, schema]).standard_normal()
    return float(median * np.exp(sigma * z))


def grammar_backend(structured: StructuredOutput, backend: str | None) -> str | None:
    """The backend that constrains decoding, or None when outputs are unconstrained."""
    if structured.mode != "json_schema":
        return None
    name = backend or "xgrammar"  # `arg_groups/serving_hook.py`: None resolves to xgrammar
    return None if name == "none" else name


@dataclass
class HostShare:
    """The host CPU one server's grammar compiles run on."""

    cores: float
    ranks: int
    executor_workers: int = EXECUTOR_MAX_WORKERS


def host_share(cpus_per_node: int, gpus_per_node: int, world_size: int) -> HostShare:
    """A server's share of its node's CPUs (by its GPUs), less the processes that keep a core busy.

    Each TP rank on the node compiles every schema, so `ranks` multiplies the demand of one compile.
    """
    ranks = max(min(world_size, gpus_per_node), 1)
    share = cpus_per_node * ranks / max(gpus_per_node, 1)
    return HostShare(cores=max(share - ranks - BUSY_HOST_PROCESSES, 1.0), ranks=ranks,
                     executor_workers=min(EXECUTOR_MAX_WORKERS, cpus_per_node + 4))


@dataclass
class _Compile:
    """One compile running on the host: done when the shared progress reaches `target`."""

    schema: int
    target: float
    tasks: list[_Task] = field(default_factory=list)


@dataclass
class _Task:
    """One executor task: a request's own call of `_init_value_dispatch`."""

    payload: SimRequest
    schema: int
    measured: bool
    started: float = 0.0


@dataclass
class CompilePool:
    """Compiles sharing the host's cores: processor sharing, all compiles progressing at one rate.

    `progress` counts seconds of compile work as if each compile ran alone; a compile of `s` seconds
    started at progress `p` finishes when progress reaches `p + s`.
    """

    host: HostShare
    threads: int
    active: list[_Compile] = field(default_factory=list)
    progress: float = 0.0
    updated: float = 0.0

    @property
    def rate(self) -> float:
        """Progress per wall second: 1 until the compiles' threads outnumber the cores."""
        demand = len(self.active) * self.threads * self.host.ranks
        return 1.0 if demand <= self.host.cores else self.host.cores / demand

    def advance(self, now: float) -> None:
        """Move shared progress to `now`."""
        if self.active:
            self.progress += (now - self.updated) * self.rate
        self.updated = now

    def start(self, schema: int, seconds: float, now: float) -> _Compile:
        """Start a compile of `seconds` alone-on-the-host (call `advance(now)` first)."""
        self.advance(now)
        job = _Compile(schema=schema, target=self.progress + seconds)
        self.active.append(job)
        return job

    def next_done(self) -> float | None:
        """Wall time the next compile finishes at the current rate (None when none run)."""
        if not self.active:
            return None
        target = min(job.target for job in self.active)
        return self.updated + max(target - self.progress, 0.0) / self.rate

    def finish(self, now: float) -> list[_Compile]:
        """Compiles done by `now`, removed from the pool."""
        self.advance(now)
        done = [job for job in self.active if job.target <= self.progress + 1e-9]
        self.active = [job for job in self.active if job.target > self.progress + 1e-9]
        return done


@dataclass
class GrammarCache:
    """One server's grammar backend: SGLang's cache of finished grammars, its executor and the compiles.

    `request` answers whether a request may go straight to the waiting queue (a cache hit); otherwise its
    task is held until `collect` returns it once its grammar is ready on every TP rank.
    """

    backend: str
    host: HostShare
    ready: set[int] = field(default_factory=set)
    compiled: set[int] = field(default_factory=set)
    compile_seconds: list[float] = field(default_factory=list)
    hits: int = 0
    lookups: int = 0
    version: int = 0
    pool: CompilePool = field(init=False)
    queued: list[_Task] = field(default_factory=list)
    running: int = 0
    done: list[SimRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pool = CompilePool(host=self.host, threads=COMPILE_THREADS.get(self.backend, 1))

    @property
    def shares_inflight(self) -> bool:
        """Whether the backend's compiler joins a compile of the same schema already running."""
        return self.backend in SHARES_INFLIGHT_COMPILE

    @property
    def pending(self) -> int:
        """Requests in the grammar queue (`sglang:num_grammar_queue_reqs`)."""
        return self.running + len(self.queued)

    def warm(self, schemas: int) -> None:
        """Every known schema compiled at startup (casebook case 4 round 2: the warm-up script)."""
        self.ready.update(range(schemas))
        self.compiled.update(range(schemas))

    def request(self, payload: SimRequest, schema: int, now: float, measured: bool) -> bool:
        """A request of `schema` arrives at `now`: True on a cache hit, else its compile task is submitted."""
        if measured:
            self.lookups += 1
        if schema in self.ready:
            if measured:
                self.hits += 1
            return True
        task = _Task(payload=payload, schema=schema, measured=measured)
        if self.running < self.host.executor_workers:
            self._start(task, now)
        else:
            self.queued.append(task)  # ThreadPoolExecutor: FIFO behind busy workers
        return False

    def next_done(self) -> float | None:
        """When the next compile finishes (or a task already done is waiting to be collected)."""
        if self.done:
            return self.pool.updated
        return self.pool.next_done()

    def collect(self, now: float) -> list[SimRequest]:
        """Payloads of requests whose grammar is ready by `now`; their schemas join the cache."""
        for job in self.pool.finish(now):
            self._complete(job, now)
        while self.queued and self.running < self.host.executor_workers:
            self._start(self.queued.pop(0), now)
        ready, self.done = self.done, []
        self.version += 1
        return ready

    def _start(self, task: _Task, now: float) -> None:
        """An executor worker picks the task up: compile, join the same schema's compile, or hit xgrammar's cache."""
        task.started = now
        self.running += 1
        self.version += 1
        if self.shares_inflight and task.schema in self.compiled:
            self._finish_task(task, now)
            return
        job = next((j for j in self.pool.active if j.schema == task.schema), None) if self.shares_inflight else None
        if job is None:
            job = self.pool.start(task.schema, solo_compile_seconds(self.backend, task.schema), now)
        job.tasks.append(task)

    def _complete(self, job: _Compile, now: float) -> None:
        if self.shares_inflight:
            self.compiled.add(job.schema)
        for task in job.tasks:
            self._finish_task(task, now)

    def _finish_task(self, task: _Task, now: float) -> None:
        # get_ready_grammar_requests: set_cache on the poll that moves the request (the next scheduler step).
        self.running -= 1
        self.ready.add(task.schema)
        if task.measured:
            self.compile_seconds.append(now - task.started)  # _init_value_dispatch's own timer
        self.done.append(task.payload)


def prompt_only_failures(structured: StructuredOutput, constrained: bool, n: int, rng: np.random.Generator
                         ) -> dict[str, int]:
    """Failures by kind among `n` completed requests; constrained decoding cannot emit invalid JSON."""
    if structured.mode == "none" or constrained:
        return {}
    failed = int(rng.binomial(n, min(max(structured.prompt_only_failure_rate, 0.0), 1.0)))
    kinds = list(FAILURE_KINDS)
    split = rng.multinomial(failed, [FAILURE_KINDS[k] for k in kinds]) if failed else np.zeros(len(kinds), int)
    return {k: int(v) for k, v in zip(kinds, split, strict=True)}
