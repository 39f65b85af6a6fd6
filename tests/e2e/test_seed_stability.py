"""The casebook playbooks end on the same final configuration whatever the traffic seed (seeds 0 to 4).

A decision that flips with the seed is noise read as signal: the final deployment a user pays for must not
depend on which prompts a benchmark happened to draw. Jobs run as `sglang-tuner tune --json --seed S`, two
at a time (the machine's cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
CLI = str(Path(sys.executable).with_name("sglang-tuner"))
CASEBOOK = ("coding-assistant", "document-qa-rag", "nightly-batch", "structured-output", "moe-at-scale")
SEEDS = range(5)
# As in test_playbooks: moe-at-scale's changes are tens of percent, far outside the noise; one repeat.
EXTRA = {"moe-at-scale": ["--repeats", "1"]}


def _tune(playbook: str, seed: int) -> dict[str, Any]:
    done = subprocess.run([CLI, "tune", "--playbook", playbook, "--seed", str(seed), "--json",
                           *EXTRA.get(playbook, [])], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"tune --playbook {playbook} --seed {seed}: {done.stderr[-500:]}"
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@cache
def _reports() -> dict[tuple[str, int], dict[str, Any]]:
    jobs = [(playbook, seed) for playbook in CASEBOOK for seed in SEEDS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(jobs, pool.map(lambda job: _tune(*job), jobs), strict=True))


def _final(report: dict[str, Any]) -> tuple[str, str, list[str]]:
    final = report["final"]
    return final["model"], json.dumps(final["deployment"], sort_keys=True), report["job"]["accepted"]


# coding-assistant's starting TTFT p95 sits on its 1,000 ms target: at seed 3 the mixed chunk round's pooled
# p95 is 1,001 ms [914, 1,078], within noise after the extra seeds, and the point estimate rolls it back; the
# rollback is a branch (docs/tuning.md, "The beam"), FP8 on top of it meets the target, and the job ends on
# chunk 4096 + mixed chunk, FP8, EAGLE3 and TP4 x 2 as at seeds 0, 1, 2 and 4.
@pytest.mark.parametrize("playbook", CASEBOOK)
def test_the_final_configuration_is_the_same_at_seeds_0_to_4(playbook: str) -> None:
    reports = _reports()
    finals = {seed: _final(reports[(playbook, seed)]) for seed in SEEDS}
    kept = {seed: final[2] for seed, final in finals.items()}
    assert len({final[:2] for final in finals.values()}) == 1, f"{playbook}: kept per seed {kept}"
    assert len({reports[(playbook, seed)]["job"]["state"] for seed in SEEDS}) == 1
