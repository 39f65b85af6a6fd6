"""An agent's whole session through the mcp SDK's own client, over stdio and over streamable HTTP.

Both transports talk to a real service (`sglang-tuner serve`: uvicorn on a free loopback port, SQLite in a
temp dir): over stdio the job tools reach it through SGLANG_TUNER_URL; over HTTP the agent connects to the
service's own `/mcp`. The session lists tools, profiles a small log, diagnoses the casebook's round-0
coding-assistant output, starts a coding-assistant job, waits for it with get_job and reads the final
launch commands.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.api.service_process import Service, create_keys, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
CASE1 = (ROOT / "tests" / "unit" / "diagnosis" / "fixtures" / "case1_round0.txt").read_text()
SCENARIO = ROOT / "examples" / "casebook" / "coding-assistant-final.toml"
SYSTEM = " ".join(f"w{i}" for i in range(40))
TOOLS = ["profile_workload", "plan_capacity", "diagnose_benchmark", "recommend_playbook", "start_tuning_job",
         "get_job", "list_rounds", "explain_decision", "cancel_job", "render_launch_commands", "validate_config",
         "compare_rounds"]
FINISHED = {"succeeded", "failed", "cancelled"}


class Running(Service):
    keys: dict[str, str]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    running = Running(tmp_path_factory.mktemp("agent") / "tuner.db", free_port())
    running.keys = create_keys(running.db, ["read", "write"])
    running.start()
    yield running
    running.stop()


def _stdio(service: Running) -> StdioServerParameters:
    command = shutil.which("sglang-tuner", path=str(Path(sys.executable).parent)) or "sglang-tuner"
    return StdioServerParameters(command=command, args=["mcp"], cwd=str(ROOT),
                                 env={"SGLANG_TUNER_URL": service.url, "SGLANG_TUNER_TOKEN": service.keys["write"]})


def _http(service: Running, key: str | None, **headers: str) -> Any:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return streamable_http_client(f"{service.url}/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=120))


def _log() -> str:
    lines = [{"prompt": f"{SYSTEM} w{50 + i} w{60 + i}", "completion": "w1 w2 w3 w4"} for i in range(4)]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


async def _profile_and_diagnose(client: Client, tokenizer_dir: Path) -> None:
    assert [tool.name for tool in (await client.list_tools()).tools] == TOOLS

    profiled = await client.call_tool("profile_workload", {"log_text": _log(), "tokenizer": str(tokenizer_dir)})
    assert not profiled.is_error, profiled.content
    data = profiled.structured_content["data"]
    assert data["requests"] == 4 and data["input_median"] == 42 and data["prefix_sharing_rate"] > 0.7

    diagnosed = await client.call_tool("diagnose_benchmark", {"bench_output": CASE1})
    assert not diagnosed.is_error, diagnosed.content
    diagnosis = diagnosed.structured_content["data"]
    findings = {f["id"]: f for f in diagnosis["findings"]}
    # Casebook case 1, round 0: P99 TTFT 4,380.92 ms over a 592.34 ms median, and a 982.51 ms ITL stall.
    assert findings["ttft_tail_blocking"]["evidence"]["p99_over_median"] >= 7
    assert findings["itl_stall"]["evidence"]["max_itl_ms"] == 982.51
    assert findings["itl_stall"]["technique"] == diagnosis["next_technique"] == "chunked_prefill"


async def _tune(client: Client) -> dict[str, Any]:
    started = await client.call_tool("start_tuning_job", {"playbook": "coding-assistant"})
    assert not started.is_error, started.content
    job_id = started.structured_content["data"]["id"]
    assert started.structured_content["links"]["report"].endswith(f"/v1/jobs/{job_id}/report")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        polled = await client.call_tool("get_job", {"job_id": job_id, "wait_seconds": 20})
        assert not polled.is_error, polled.content
        if polled.structured_content["data"]["job"]["state"] in FINISHED:
            return polled.structured_content
    raise AssertionError(f"job {job_id} did not finish")


def _check_final(result: dict[str, Any]) -> None:
    assert result["data"]["job"]["state"] == "succeeded"
    final = result["data"]["final"]
    assert final["launch_commands"], final
    for process in final["launch_commands"]:
        assert process["argv"][:3] == ["python", "-m", "sglang.launch_server"]
        assert "--model-path" in process["argv"]
    # The summary an agent reads first carries the commands as shell lines.
    assert all(line in result["summary"] for line in final["commands"])


def test_an_agent_session_over_stdio(service: Running, tokenizer_dir: Path) -> None:
    async def session() -> None:
        async with Client(_stdio(service), read_timeout_seconds=120) as client:
            await _profile_and_diagnose(client, tokenizer_dir)
            rendered = await client.call_tool("render_launch_commands", {"scenario_toml": SCENARIO.read_text()})
            assert not rendered.is_error, rendered.content
            launch = rendered.structured_content["data"]
            assert [w["env"]["CUDA_VISIBLE_DEVICES"] for w in launch["workers"]] == ["0,1", "2,3", "4,5", "6,7"]
            assert launch["router"]["argv"][:3] == ["python", "-m", "sglang_router.launch_router"]
            _check_final(await _tune(client))

    anyio.run(session)


def test_an_agent_session_over_streamable_http(service: Running, tokenizer_dir: Path) -> None:
    async def session() -> None:
        async with Client(_http(service, service.keys["write"]), read_timeout_seconds=120) as client:
            await _profile_and_diagnose(client, tokenizer_dir)
            _check_final(await _tune(client))

    anyio.run(session)


def test_over_http_a_read_key_cannot_start_work_and_no_key_cannot_connect(service: Running) -> None:
    async def session() -> str:
        async with Client(_http(service, service.keys["read"]), read_timeout_seconds=30) as client:
            refused = await client.call_tool("start_tuning_job", {"playbook": "coding-assistant"})
            assert refused.is_error
            listed = await client.call_tool("recommend_playbook", {"slo": {"deadline_hours": 12}})
            assert listed.structured_content["data"]["playbook"] == "nightly-batch"
            return refused.content[0].text

    assert "write-scoped credential" in anyio.run(session)
    bare = httpx.post(f"{service.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                      headers={"Accept": "application/json, text/event-stream"})
    assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("Bearer")


def test_a_foreign_origin_or_host_is_refused_even_with_a_write_key(service: Running) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "page", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {service.keys['write']}"}
    foreign = httpx.post(f"{service.url}/mcp", json=init, headers=headers | {"Origin": "https://evil.example"})
    assert foreign.status_code == 403
    rebound = httpx.post(f"{service.url}/mcp", json=init, headers=headers | {"Host": "evil.example"})
    assert rebound.status_code == 421
    own = httpx.post(f"{service.url}/mcp", json=init, headers=headers | {"Origin": service.url})
    assert own.status_code == 200 and own.json()["result"]["serverInfo"]["name"] == "sglang-tuner"
