"""Process lifetimes read from /proc, and the parent-death signal every launched process carries.

A PID alone names a process only while it lives: once it exits the kernel may hand the number to another
one. A process is therefore known by its PID *and* its start time (field 22 of `/proc/<pid>/stat`, clock
ticks since boot) together with the boot it started in (`/proc/sys/kernel/random/boot_id`); nothing is
ever signalled unless all three still match.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PROC = Path("/proc")


def boot_id() -> str:
    """This boot's id: start times from another boot say nothing about processes living now."""
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...


def start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot), or None when no live process has that PID."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def alive(pid: int, started: int) -> bool:
    """Whether the process `pid` that started at `started` is still the one running under that PID."""
    return pid > 0 and start_time(pid) == started


def command_line(pid: int) -> str:
    """The process's argv joined by spaces (its name in brackets for kernel threads), "" when unreadable."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    if raw:
        return " ".join(part.decode(errors="replace") for part in raw.rstrip(b"\0").split(b"\0"))
    try:
        return "[" + (PROC / str(pid) / "comm").read_text().strip() + "]"
    except OSError:
        return ""


def group_members(pgid: int, *, since: int = 0) -> list[int]:
    """Live (non-zombie) processes of process group `pgid` that started at or after `since`.

    `since` is the group leader's start time: a member cannot predate the leader of its group, so an older
    process with that group id belongs to another group that happened to reuse the number.
    """
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and len(fields) > 19 and int(fields[2]) == pgid and fields[0] not in ("Z", "X") \
                and int(fields[19]) >= since:
            members.append(int(entry.name))
    return members


# /proc/net/tcp's `st` field (include/net/tcp_states.h).
TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
              "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def tcp_sockets(port: int) -> list[tuple[str, str]]:
    """(state, inode) of every TCP socket whose local port is `port` (any address, IPv4 or IPv6).

    The state is /proc/net/tcp's hex code (`0A` is LISTEN); a socket no process holds any more (TIME_WAIT)
    has inode "0".
    """
    found = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is ADDR:PORT in hex; field 9 is the inode
            if len(fields) > 9 and int(fields[1].rpartition(":")[2], 16) == port:
                found.append((fields[3], fields[9]))
    return found


def listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on TCP `port` (any address, IPv4 or IPv6), from /proc/net/tcp and tcp6."""
    return {inode for state, inode in tcp_sockets(port) if state == "0A"}


def socket_owners(inodes: set[str]) -> list[int]:
    """PIDs with an open file descriptor on one of the socket `inodes` (readable ones only)."""
    if not inodes:
        return []
    wanted = {f"socket:[{inode}]" for inode in inodes}
    owners = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in wanted for fd in (entry / "fd").iterdir()):
                owners.append(int(entry.name))
        except OSError:
            continue
    return owners


def _prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not Linux: no parent-death signal; teardown and the registry remain
        return None


def die_with_parent(parent: int) -> Callable[[], None]:
    """A `preexec_fn` that makes the child get SIGKILL when the thread that started it dies (any way).

    The kernel sends the signal when the *thread* that forked the child exits, so spawn from a thread that
    outlives the round (the event loop's). If the parent died between fork and prctl, the child would
    never get the signal: it checks and exits at once.
    """
    prctl = _prctl()

    def arm() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm
