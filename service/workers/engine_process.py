"""Run each tuning job's engine in a child process at a lower CPU priority, so the API keeps its latency.

The simulator's rounds are CPU-bound Python. On threads of the service process, twenty of them share the
interpreter lock with the event loop, and every API request waits behind them (`bench/api.py` measured a
P99 of seconds for `GET /v1/jobs/{id}`). In a child process niced below the service, a job uses only the
CPU the API leaves idle. The child's journal is its pipe: it sends each round and event and waits for the
parent to commit it before the engine goes on, so the durability promise of `JobExecutor` holds unchanged.

Idle-class children still cost the API latency when they run on every CPU: a CPU busy with them counts
as idle when the kernel places a waking task, so the API's event loop wakes onto it and waits up to a
scheduler tick (4 ms at HZ=250) for the child to be preempted, several times per request (BENCHMARKS.md,
"API"). So children are kept off the first `serving_cpus` CPUs of the service's affinity set, which stay
free for the event loop; on a machine with no more CPUs than that, they may use every CPU.

Children fork from a forkserver that has already imported the engine, so a job starts in milliseconds
without inheriting the service's threads. A stop reaches the child as a signal (SIGUSR1: cancel, SIGUSR2:
pause for a restart); its engine ends the job at the next safe point and sends its report. A signal's default
action would kill a child that has not yet installed its handlers, so the child says "ready" once it has, and
a stop asked for before that is held and sent then. A child whose parent dies finds its pipe closed at its
next journal entry and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import signal
from multiprocessing.connection import Connection

import msgspec

from service.domain import Job, JobState, Round
from service.engine import JobEvent, RoundJournal, TuningEngine, TuningReport
from service.plugin_host import PluginHost
from service.workers.engine_executor import EngineExecutor, build_engine, run_job

# Niceness added to job processes (the lowest priority): the API process wins the CPU whenever it has work.
JOB_NICENESS = 19
# prctl(2) option: the signal a process receives when its parent dies.
_PR_SET_PDEATHSIG = 1
# CPUs kept free of job processes for the API's event loop (see the module docstring).
SERVING_CPUS = 1


class _Message(msgspec.Struct, array_like=True):
    kind: str
    round: Round | None = None
    event: JobEvent | None = None
    report: TuningReport | None = None
    error: str | None = None


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(_Message).decode
# A stop reaches the child as a signal: the engine ends the job as asked at its next safe point.
_STOP_SIGNALS = {JobState.CANCELLED: signal.SIGUSR1, JobState.PAUSED: signal.SIGUSR2}


class PipeJournal:
    """The child's journal: each entry goes to the service over the pipe, which answers once it is committed."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def record_round(self, round_: Round, /) -> None:
        self._send(_Message("round", round=round_))

    async def record_event(self, event: JobEvent, /) -> None:
        self._send(_Message("event", event=event))

    def _send(self, message: _Message) -> None:
        self.conn.send_bytes(_encode(message))
        if self.conn.recv_bytes() != b"ok":  # the parent committed it; anything else means stop here
            raise SystemExit(0)


def _context() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["service.workers.engine_process"])
    return context


def job_cpus(serving_cpus: int) -> frozenset[int] | None:
    """The CPUs job processes may use: this process's CPUs less the first `serving_cpus` (None: all of them)."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (OSError, AttributeError):  # not Linux: no affinity control
        return None
    if serving_cpus <= 0 or len(allowed) <= serving_cpus:
        return None
    return frozenset(allowed[serving_cpus:])


def lower_job_priority(niceness: int, cpus: frozenset[int] | None) -> None:
    """Make this process a job process: `niceness` added, Linux's idle class, and only `cpus` (None: any)."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(niceness)
        # Linux: an idle-class task gets only the CPU time no other task wants.
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    if cpus:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, cpus)


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent (the forkserver, which exits with the service) dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _job_main(conn: Connection, job_bytes: bytes, niceness: int, cpus: frozenset[int] | None = None) -> None:
    """The child: rebuild the job, run (or resume) the engine journaling over the pipe, send the report."""
    die_with_parent()  # a killed service leaves no job computing on: its next start resumes the job
    lower_job_priority(niceness, cpus)
    # The stop signals are heard from the start: one that arrives while the plugins load (seconds) is kept
    # and handed to the engine once it exists, instead of ending the process by the signal's default action.
    early: list[tuple[JobState, str]] = []
    built: list[TuningEngine] = []

    def on_stop(state: JobState, reason: str) -> None:
        if built:
            built[0].stop(state, reason)
        else:
            early.append((state, reason))

    for state, number in _STOP_SIGNALS.items():
        reason = "cancelled by a user" if state is JobState.CANCELLED else "the service is stopping"
        signal.signal(number, lambda *_, state=state, reason=reason: on_stop(state, reason))
    conn.send_bytes(_encode(_Message("ready")))  # a stop signal no longer ends this process: it may come now
    job = msgspec.msgpack.decode(job_bytes, type=Job)
    engine = build_engine(PluginHost(), job, PipeJournal(conn))
    built.append(engine)
    for state, reason in early[:1]:
        engine.stop(state, reason)
    try:
        report = asyncio.run(run_job(engine, job))
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the service went away; its next start resumes the job from the committed rounds
    except Exception as exc:  # noqa: BLE001 - the parent fails the job with the message
        conn.send_bytes(_encode(_Message("error", error=f"{type(exc).__name__}: {exc}")))
        return
    conn.send_bytes(_encode(_Message("done", report=report)))


class ProcessEngineExecutor:
    """A `JobExecutor` that runs the tuning engine for each job in its own niced child process.

    Only jobs whose runner computes rounds itself (restarts no servers, needs no GPU: the simulator) go to a
    child: terminating a child on cancel must never orphan SGLang servers, so the others run on a thread
    of this process through `EngineExecutor`. The child loads the installed plugins itself (`PluginHost()`),
    so use this executor with the default plugin host; a host built in code stays with `EngineExecutor`.
    """

    def __init__(self, plugins: PluginHost, niceness: int = JOB_NICENESS, *,
                 serving_cpus: int = SERVING_CPUS) -> None:
        self.plugins = plugins
        self.in_process = EngineExecutor(plugins)
        self.niceness = niceness
        self.cpus = job_cpus(serving_cpus)
        self._context = _context()
        self._children: dict[str, multiprocessing.process.BaseProcess] = {}
        # Children whose stop-signal handlers are installed, and the stop held for a child not yet ready.
        self._ready: set[str] = set()
        self._held: dict[str, int] = {}

    def stop(self, job_id: str, state: JobState, reason: str) -> bool:
        """Signal the child of `job_id` (or the in-process engine) to end as `state`."""
        process = self._children.get(job_id)
        if process is None or process.pid is None:
            return self.in_process.stop(job_id, state, reason)
        number = _STOP_SIGNALS.get(state)
        if number is None:
            return False
        if job_id not in self._ready:  # its default action would kill the child: sent once it is ready
            self._held.setdefault(job_id, number)
            return True
        return self._signal(job_id, number)

    def _signal(self, job_id: str, number: int) -> bool:
        """Send `number` to the child of `job_id`; False when it has no child or the child is gone."""
        process = self._children.get(job_id)
        if process is None or process.pid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, number)
            return True
        return False

    def runs_in_child(self, job: Job) -> bool:
        """Whether `job`'s runner is pure computation, safe to run (and terminate) in a child process."""
        try:
            capabilities = self.plugins.get("runner", job.runner).capabilities
        except (KeyError, AttributeError):
            return False
        return not (capabilities.restarts_servers or capabilities.needs_gpu or capabilities.measures_real_gpus)

    async def run(self, job: Job, journal: RoundJournal) -> TuningReport:
        """Run `job`; every journal entry is committed before the engine goes on."""
        if not self.runs_in_child(job):
            return await self.in_process.run(job, journal)
        parent, child = self._context.Pipe()
        process = self._context.Process(target=_job_main, name=f"sglang-tuner-{job.id}", daemon=True,
                                        args=(child, msgspec.msgpack.encode(job), self.niceness, self.cpus))
        # Starting waits for the forkserver to fork (tens of ms, more under load): off the event loop.
        starting = asyncio.ensure_future(asyncio.to_thread(process.start))
        try:
            await asyncio.shield(starting)
            self._children[job.id] = process
            child.close()
            return await self._follow(job.id, parent, journal)
        finally:
            self._children.pop(job.id, None)
            self._ready.discard(job.id)
            self._held.pop(job.id, None)
            with contextlib.suppress(BaseException):
                await starting  # cancelled while starting: the child must exist before it can be stopped
            child.close()
            # Cancelled or finished: the child goes first, then the pipe closes.
            if process.is_alive():
                process.terminate()
            if process.pid is not None:
                await asyncio.to_thread(process.join, 5)
            parent.close()

    async def _follow(self, job_id: str, conn: Connection, journal: RoundJournal) -> TuningReport:
        while True:
            await _readable(conn)
            try:
                message = _decode(conn.recv_bytes())
            except EOFError as exc:
                raise RuntimeError("the job process exited without a result") from exc
            if message.kind == "ready":
                self._ready.add(job_id)
                held = self._held.pop(job_id, None)
                if held is not None:
                    self._signal(job_id, held)
            elif message.kind == "round" and message.round is not None:
                await journal.record_round(message.round)
                conn.send_bytes(b"ok")
            elif message.kind == "event" and message.event is not None:
                await journal.record_event(message.event)
                conn.send_bytes(b"ok")
            elif message.kind == "done" and message.report is not None:
                return message.report
            else:
                raise RuntimeError(message.error or f"unexpected message {message.kind!r} from the job process")


async def _readable(conn: Connection) -> None:
    """Wait on the event loop until `conn` has data (or EOF): no thread is held per running job."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(conn.fileno(), readable)
    try:
        await ready
    finally:
        loop.remove_reader(conn.fileno())
