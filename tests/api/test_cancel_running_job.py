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
            for wait in (2.0, 6.0):  # in the baseline, then in a later round
                job = client.post("/v1/jobs", json={"playbook": "moe-at-scale"}).json()
                deadline = time.monotonic() + 60
                while client.get(f"/v1/jobs/{job['id']}").json()["state"] != "running":
                    assert time.monotonic() < deadline, "the job never started"
                    time.sleep(0.2)
                time.sleep(wait)
                assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
                ended = client.get(f"/v1/jobs/{job['id']}", params={"wait": 30}).json()
                assert ended["state"] == "cancelled", str({k: v for k, v in ended.items() if k not in ("scenario", "links", "next")})
                rounds = client.get(f"/v1/jobs/{job['id']}/rounds").json()
                assert rounds, "the rounds committed before the cancel are kept"
    finally:
        service.stop()
