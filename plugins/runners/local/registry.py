"""The process registry: what each round started, on disk before it starts it, so no owner's death orphans it.

One JSON file per round under the state directory (`RunnerSettings.state_dir`), named after the round's
owner (the process running the round). Each process is recorded as planned (name, listener) before it is
spawned and with its PID, process group and start time right after; the file is replaced atomically and
synced each time, and removed once teardown has left nothing running. A file whose owner is no longer
alive is a dead owner's round: `end_orphans` kills what of it still runs and says so.

The parent-death signal already ends a killed owner's direct children; the registry covers what that
signal cannot: a group member that outlived its leader, an owner that spawned from a thread which then
ended, and a non-Linux host.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from plugins.runners.local.lifetime import alive, boot_id, command_line, group_members, start_time
from service import ProcessRecord, RunnerSettings

_SEQUENCE = itertools.count(1)
GONE_WAIT_S = 5.0


class Owner(msgspec.Struct, frozen=True, kw_only=True):
    """The process that runs a round: while it lives, its processes are its own business."""

    pid: int
    start_time: int
    argv: str = ""


class RoundRecord(msgspec.Struct, kw_only=True):
    """One round's file in the registry."""

    round: str
    owner: Owner
    boot_id: str
    created: str
    processes: list[ProcessRecord] = msgspec.field(default_factory=list)


def state_dir(settings: RunnerSettings) -> Path:
    """The registry's directory: `state_dir` from the settings, else the user's state directory."""
    if settings.state_dir:
        return Path(settings.state_dir)
    base = os.environ.get("XDG_STATE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".local" / "state")
        except RuntimeError:  # no home directory (a bare service account): the records still need a place
            base = str(Path(tempfile.gettempdir()) / f"sglang-tuner-{os.getuid()}")
    return Path(base) / "sglang-tuner" / "processes"


def this_owner() -> Owner:
    """This process as an owner."""
    pid = os.getpid()
    return Owner(pid=pid, start_time=start_time(pid) or 0, argv=command_line(pid)[:300])


class RoundRegistry:
    """The registry file of one round, kept up to date as its processes start; `close` removes it."""

    def __init__(self, directory: Path, owner: Owner | None = None) -> None:
        self.owner = owner or this_owner()
        name = f"{self.owner.pid}-{self.owner.start_time}-{next(_SEQUENCE)}-{time.time_ns()}"
        self.path = directory / f"{name}.json"
        self.record = RoundRecord(round=name, owner=self.owner, boot_id=boot_id(),
                                  created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    @property
    def processes(self) -> list[ProcessRecord]:
        """What the round has recorded, in launch order."""
        return list(self.record.processes)

    def planned(self, name: str, kind: str, host: str, port: int, argv: Sequence[str]) -> None:
        """Record a process about to be spawned (no PID yet): written before the launch."""
        self.record.processes.append(ProcessRecord(name=name, kind=kind, host=host, port=port, argv=list(argv)))
        self._write()

    def started(self, name: str, pid: int, started: int) -> None:
        """Record the PID, process group and start time of the planned process `name`."""
        self.record.processes = [
            msgspec.structs.replace(p, pid=pid, pgid=pid, start_time=started) if p.name == name and not p.pid else p
            for p in self.record.processes]
        self._write()

    def close(self) -> None:
        """Forget the round: every process it started is gone (a file that cannot go is swept next round)."""
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.path.with_suffix(".tmp")
        with scratch.open("wb") as handle:
            handle.write(msgspec.json.encode(self.record))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(scratch, self.path)
        _sync_dir(self.path.parent)


def _sync_dir(directory: Path) -> None:
    """Make a rename durable: a power cut right after it must not bring the old file back."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _owner_alive(record: RoundRecord) -> bool:
    return record.boot_id == boot_id() and alive(record.owner.pid, record.owner.start_time)


def _survivors(process: ProcessRecord) -> list[int]:
    """What still runs of the recorded process's group.

    While the leader is the recorded process, the group is its group. Once the leader is gone, members may
    remain (their group id is the leader's PID, and the kernel hands out no PID still in use as a group id);
    once that PID names another process, the old group had emptied first, so nothing of it is left.
    """
    if not process.pid:
        return []
    leader = start_time(process.pid)
    if leader is not None and leader != process.start_time:
        return []  # the PID was reused
    members = set(group_members(process.pgid, since=process.start_time))
    if leader is not None:
        members.add(process.pid)
    return sorted(members)


def _kill(pids: list[int], pgid: int, leader_alive: bool) -> None:
    if leader_alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for pid in pids:  # members whose leader is gone: one by one, each checked above
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _end(record: RoundRecord) -> tuple[list[str], list[str]]:
    """Kill what still runs of a dead owner's round: (what was ended, what could not be)."""
    ended, kept = [], []
    for process in record.processes:
        pids = _survivors(process)
        if not pids:
            continue
        _kill(pids, process.pgid, alive(process.pid, process.start_time))
        deadline = time.monotonic() + GONE_WAIT_S
        while _survivors(process) and time.monotonic() < deadline:
            time.sleep(0.05)
        where = f" on {process.host}:{process.port}" if process.port else ""
        (kept if _survivors(process) else ended).append(
            f"{process.name} (pid {process.pid}, {len(pids)} process(es) in its group{where})")
    return ended, kept


def _read(path: Path) -> RoundRecord | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=RoundRecord)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def end_orphans(directory: Path) -> list[str]:
    """End every process a dead owner's round left running; one note per such round, for the round's notes.

    A round whose owner still lives (a concurrent round, another job of the same service) is left alone.
    A record from an earlier boot only names processes that are gone, and is dropped.
    """
    notes: list[str] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        record = _read(path)
        if record is None:
            notes.append(f"orphans: unreadable process record {path.name} removed; nothing was killed for it")
            path.unlink(missing_ok=True)
            continue
        if _owner_alive(record):
            continue
        ended, kept = _end(record) if record.boot_id == boot_id() else ([], [])
        owner = f"a dead owner (pid {record.owner.pid}: {record.owner.argv or '?'}) of round {record.round} " \
                f"started {record.created}"
        if ended:
            notes.append(f"orphans: ended {'; '.join(ended)}, left behind by {owner}")
        if kept:
            notes.append(f"orphans: could not end {'; '.join(kept)}, left behind by {owner}; kill them by hand")
            continue
        path.unlink(missing_ok=True)
    for scratch in directory.glob("*.tmp") if directory.is_dir() else []:
        _drop_scratch(scratch)
    return notes


def _drop_scratch(scratch: Path) -> None:
    """A half-written record of a dead owner (its name starts `<pid>-<start time>-`)."""
    pid, _, rest = scratch.name.partition("-")
    started = rest.partition("-")[0]
    if pid.isdigit() and started.isdigit() and not alive(int(pid), int(started)):
        scratch.unlink(missing_ok=True)
