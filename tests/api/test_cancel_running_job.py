"""A running simulated job in `sglang-tuner serve` (computed in a job process of its own) ends `cancelled`.

The cancel reaches the job process as a signal while a round is being computed in it; the stop takes effect
at the next safe point, and the job ends in the state asked for, with the rounds committed so far.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.api.service_process import Service, free_port

pytestmark = pytest.mark.slow


def test_a_cancel_mid_round_ends_the_job_cancelled(tmp_path: Path) -> None:
    service = Service(tmp_path / "jobs.db", free_port(), "--dev")
    service.start()
    try:
        with httpx.Client(base_url=service.url, timeout=60) as client:
            # At once (the job process may still be loading its plugins), then once a round is under way.
            for after_a_round in (False, True):
                job = client.post("/v1/jobs", json={"playbook": "moe-at-scale"}).json()
                deadline = time.monotonic() + 120
                while not started(client, job["id"], after_a_round):
                    assert time.monotonic() < deadline, "the job never got under way"
                    time.sleep(0.2)
                assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
                ended = client.get(f"/v1/jobs/{job['id']}", params={"wait": 60}).json()
                shown = {k: v for k, v in ended.items() if k not in ("scenario", "links", "next")}
                assert ended["state"] == "cancelled", str(shown)
                if after_a_round:
                    rounds = client.get(f"/v1/jobs/{job['id']}/rounds").json()
                    assert rounds, "the rounds committed before the cancel are kept"
    finally:
        service.stop()


def started(client: httpx.Client, job_id: str, after_a_round: bool) -> bool:
    if client.get(f"/v1/jobs/{job_id}").json()["state"] != "running":
        return False
    return not after_a_round or bool(client.get(f"/v1/jobs/{job_id}/rounds").json())
