"""Run a command as a child subreaper and report what it left running.

`python reaper.py CMD...` runs CMD, and every process CMD starts that outlives its parent is re-parented to this
process (Linux `PR_SET_CHILD_SUBREAPER`) instead of to init. When CMD has exited, the processes still parented
here are what CMD left behind: their command lines are printed as the last line of stdout (JSON: the command's
exit code, its stdout, and the leftovers), then they are killed and reaped. Only `/proc/<pid>/stat` and
`cmdline` are read, which every process may read of its own children, in any container."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def _children() -> dict[int, str]:
    """Live (not zombie) processes whose parent is this process, by pid, with their command lines."""
    me, found = os.getpid(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
            if int(ppid) == me and state != "Z":
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")[:120]
        except (OSError, ValueError):
            continue
    return found


def main(argv: list[str]) -> int:
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}", file=sys.stderr)
        return 125
    with tempfile.TemporaryFile("w+") as out:  # not a pipe: a process left behind would hold it open
        returncode = subprocess.run(argv, stdout=out).returncode
        out.seek(0)
        stdout = out.read()
    time.sleep(1.0)  # a process that was exiting as the command ended
    left = _children()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # a killed process's own children come here next
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG) != (0, 0):
                pass
        except ChildProcessError:
            break
        time.sleep(0.05)
    print(json.dumps({"returncode": returncode, "stdout": stdout, "left": sorted(left.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
