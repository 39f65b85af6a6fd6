"""Fifty launch/teardown cycles of emulated workers, torn down at random moments: no process survives."""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

from plugins.runners.local import SubprocessLauncher, group_members
from plugins.runners.local.processes import stop

CYCLES = 50
FULL_START_EVERY = 10


def test_no_process_survives_fifty_cycles(tmp_path: Path) -> None:
    launcher = SubprocessLauncher()
    rng = random.Random(7)
    argv = [sys.executable, "-m", "service.emulator", "--model-path", "Qwen/Qwen3.6-27B", "--port", "1"]
    faults = ["", "oom", "cuda_graph", "port_in_use", "hang"]
    children_seen = 0
    for cycle in range(CYCLES):
        full = cycle % FULL_START_EVERY == 0
        fault = "hang" if full else rng.choice(faults)
        env = {**os.environ, "SGLANG_TUNER_EMULATOR_FAULT": fault}
        process = launcher.spawn(f"cycle-{cycle}", argv, env, tmp_path / f"cycle-{cycle}.log")
        if full:  # wait until the server has started its own child process, then tear down
            deadline = time.monotonic() + 30
            while "Init torch distributed begin." not in process.log_text() and time.monotonic() < deadline:
                time.sleep(0.02)
            children_seen += len(group_members(process.pgid)) > 1
        else:  # tear down at a random moment of start-up (imports, argv check, early exit)
            time.sleep(rng.uniform(0.0, 0.3))
        stop(process, grace=2.0)
        assert process.popen.poll() is not None
        assert group_members(process.pgid) == [], f"cycle {cycle} ({fault or 'no fault'}) left processes behind"
    assert children_seen == CYCLES // FULL_START_EVERY  # the full starts really had a child to clean up
