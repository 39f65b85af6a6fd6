"""Tool schemas, strict inputs, write gating, resources and prompts, through the SDK's in-process client."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
from mcp import Client

from service.mcp import ServiceJobs, build_server, openai_tool_schemas, tool_catalogue
from service.mcp.inputs import DiagnoseBenchmarkInput

NO_SERVICE = ServiceJobs(base_url=None)


def run(server: Any, calls) -> Any:
    async def session() -> Any:
        async with Client(server) as client:
            return await calls(client)
    return anyio.run(session)


def test_input_schemas_come_from_the_msgspec_types() -> None:
    spec = next(s for s in tool_catalogue(NO_SERVICE) if s.name == "diagnose_benchmark")
    schema = spec.input_schema()
    assert schema["type"] == "object"
    assert schema["required"] == ["bench_output"]
    assert set(schema["properties"]) == set(DiagnoseBenchmarkInput.__struct_fields__)
    assert "WorkloadProfile" in schema["$defs"]


def test_bad_arguments_are_refused_naming_the_field_and_the_fix() -> None:
    async def calls(client: Client) -> list[str]:
        unknown = await client.call_tool("plan_capacity", {"model": "Qwen/Qwen3.6-27B", "gpu": "H200-SXM", "gpus": 8,
                                                           "gpu_count": 8})
        wrong = await client.call_tool("plan_capacity", {"model": "Qwen/Qwen3.6-27B", "gpu": "H200-SXM", "gpus": "8"})
        assert unknown.is_error and wrong.is_error
        return [unknown.content[0].text, wrong.content[0].text]

    unknown, wrong = run(build_server(NO_SERVICE), calls)
    assert unknown.startswith("invalid argument `gpu_count`") and "accepts: model, gpu, gpus" in unknown
    assert wrong.startswith("invalid argument `gpus`") and "Expected `int`" in wrong


def test_plan_capacity_reproduces_the_casebook_case1_figures() -> None:
    async def calls(client: Client) -> dict[str, Any]:
        result = await client.call_tool("plan_capacity", {"model": "Qwen/Qwen3.6-27B", "gpu": "H200-SXM", "gpus": 8,
                                                          "context_tokens": 3000, "concurrency": 25})
        assert not result.is_error, result.content
        return result.structured_content["data"]

    data = run(build_server(NO_SERVICE), calls)
    assert data["kv_bytes_per_token"] == 196_608
    assert data["threshold_batch_size"] == 206
    assert data["kv_for_peak_gb"] == 14.4


def test_write_tools_are_refused_without_a_write_credential() -> None:
    async def calls(client: Client) -> str:
        result = await client.call_tool("start_tuning_job", {"playbook": "coding-assistant"})
        assert result.is_error
        return result.content[0].text

    message = run(build_server(NO_SERVICE, write_allowed=lambda: False), calls)
    assert "write-scoped credential" in message


def test_job_tools_without_a_service_say_how_to_start_one() -> None:
    async def calls(client: Client) -> str:
        result = await client.call_tool("get_job", {"job_id": "j1"})
        assert result.is_error
        return result.content[0].text

    assert "sglang-tuner serve" in run(build_server(NO_SERVICE), calls)


def test_resources_and_prompts() -> None:
    async def calls(client: Client) -> tuple[list[str], str, str, list[str]]:
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        techniques = (await client.read_resource("sglang-tuner://techniques")).contents[0].text
        flags = (await client.read_resource("sglang-tuner://flags/0.5.23")).contents[0].text
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        rendered = await client.get_prompt("why is my p99 TTFT high", {"bench_output": "P99 TTFT (ms): 4380.92"})
        assert "diagnose_benchmark" in rendered.messages[0].content.text
        return uris, techniques, flags, prompts

    uris, techniques, flags, prompts = run(build_server(NO_SERVICE), calls)
    assert "sglang-tuner://playbooks/coding-assistant" in uris
    assert "sglang-tuner://flags/0.5.2" in uris
    listed = msgspec.json.decode(techniques)
    chunked = next(t for t in listed if t["name"] == "chunked_prefill")
    assert chunked["tuning_order"] == 3 and any("3x or more" in r["text"] for r in chunked["rules"])
    assert "--chunked-prefill-size" in flags
    assert prompts == ["tune my deployment", "why is my p99 TTFT high"]


def test_openai_export_lists_the_same_tools_with_the_same_schemas() -> None:
    exported = openai_tool_schemas(NO_SERVICE)
    specs = tool_catalogue(NO_SERVICE)
    assert [t["function"]["name"] for t in exported] == [s.name for s in specs]
    assert all(t["type"] == "function" for t in exported)
    by_name = {t["function"]["name"]: t for t in exported}
    assert by_name["render_launch_commands"]["function"]["parameters"] == next(
        s for s in specs if s.name == "render_launch_commands").input_schema()
    assert by_name["cancel_job"]["x-writes"] is True and by_name["get_job"]["x-writes"] is False
