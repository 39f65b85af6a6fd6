"""The streamable-HTTP app refuses foreign origins, unknown tokens, and writes without the write scope."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import httpx

from service.mcp import ServiceJobs, mcp_http_app

KEYS = {"reader": ["read"], "writer": ["read", "write"]}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def check(token: str) -> Sequence[str] | None:
    return KEYS.get(token)


def app():
    return mcp_http_app(check_token=check, allowed_hosts=["testserver"], allowed_origins=["https://console.example"],
                        resource_url="https://tuner.example/mcp", jobs=ServiceJobs(base_url=None))


def post(headers: dict[str, str], body: dict) -> list[httpx.Response]:
    async def go() -> list[httpx.Response]:
        asgi = app()
        async with asgi.router.lifespan_context(asgi):
            transport = httpx.ASGITransport(app=asgi)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
                return [await client.post("/mcp", json=body, headers=ACCEPT | headers)]
    return anyio.run(go)


def call(token: str, tool: str, arguments: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return post({"Authorization": f"Bearer {token}", "Origin": "https://console.example"}, body)[0].json()


def test_a_request_without_a_token_is_refused() -> None:
    assert post({}, INIT)[0].status_code == 401
    assert post({"Authorization": "Bearer nobody"}, INIT)[0].status_code == 401


def test_a_foreign_origin_is_refused() -> None:
    response = post({"Authorization": "Bearer reader", "Origin": "https://evil.example"}, INIT)[0]
    assert response.status_code == 403


def test_a_known_origin_with_a_token_initializes() -> None:
    response = post({"Authorization": "Bearer reader", "Origin": "https://console.example"}, INIT)[0]
    assert response.status_code == 200
    assert response.json()["result"]["serverInfo"]["name"] == "sglang-tuner"


def test_starting_work_needs_the_write_scope() -> None:
    refused = call("reader", "start_tuning_job", {"playbook": "coding-assistant"})
    assert refused["result"]["isError"] is True
    assert "write-scoped credential" in refused["result"]["content"][0]["text"]
    allowed = call("writer", "start_tuning_job", {"playbook": "coding-assistant"})
    # Past the scope check; this test app has no job service behind it, and says so.
    assert "sglang-tuner serve" in allowed["result"]["content"][0]["text"]
    read = call("reader", "recommend_playbook", {"slo": {"deadline_hours": 12}})
    assert read["result"]["structuredContent"]["data"]["playbook"] == "nightly-batch"
