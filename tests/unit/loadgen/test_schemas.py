"""Structured-output schemas, the audit of outputs against them, and the emulated model's JSON."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import respx

from service.domain import BenchSpec, LengthDist, StructuredOutput, WorkloadProfile, resolve_model
from service.emulator.json_output import document_pieces, failure_kind
from service.loadgen import PromptRequest, build_prompts, send_request
from service.loadgen.client import payload
from service.loadgen.schemas import PROMPT_MARKER, audit, prompt_schema, schema_for, schema_text

MODEL = resolve_model("Qwen/Qwen3.6-27B")


def test_a_schema_id_gives_the_same_closed_object_schema_every_time() -> None:
    first, again = schema_for(3), schema_for(3)
    assert first == again and first != schema_for(4)
    assert first["type"] == "object" and first["additionalProperties"] is False
    assert set(first["required"]) == set(first["properties"]) and 3 <= len(first["required"]) <= 6
    assert " " not in schema_text(3)  # the prompt carries it as one word


@pytest.mark.parametrize("fault", ["parse", "enum", "required", "type"])
def test_the_audit_names_each_kind_of_failure_the_casebook_splits(fault: str) -> None:
    schema_id = next(i for i in range(50) if any("enum" in p for p in schema_for(i)["properties"].values()))
    doc = " ".join(document_pieces(schema_for(schema_id), 30, fault))
    assert audit(doc, schema_id) == fault


@pytest.mark.parametrize("tokens", [19, 40, 300])  # 19: six properties and their commas
def test_a_valid_document_fills_the_requested_tokens_and_passes(tokens: int) -> None:
    for schema_id in range(20):
        pieces = document_pieces(schema_for(schema_id), tokens)
        assert len(pieces) == tokens and all(" " not in p for p in pieces)
        assert audit(" ".join(pieces), schema_id) == ""


def test_a_document_cut_by_max_new_tokens_does_not_parse() -> None:
    assert audit(" ".join(document_pieces(schema_for(0), 3)), 0) == "parse"


def test_a_schema_without_free_text_is_padded_with_whitespace() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    pieces = document_pieces(schema, 10)
    assert len(pieces) == 10 and json.loads(" ".join(pieces)) == {"n": 42}


def test_prompt_only_failures_are_a_property_of_the_prompt_at_the_given_rate() -> None:
    prompts = [[i, i + 1, i + 2] for i in range(4000)]
    kinds = [failure_kind(p, 0, 0.0374) for p in prompts]
    assert kinds == [failure_kind(p, 0, 0.0374) for p in prompts]
    assert 0.025 < sum(bool(k) for k in kinds) / len(kinds) < 0.05
    assert {k for k in kinds if k} == {"parse", "enum", "required", "type"}
    assert not any(failure_kind(p, 0, 0.0) for p in prompts)


def _workload(mode: str) -> WorkloadProfile:
    return WorkloadProfile(input=LengthDist(median=64, kind="fixed"), output=LengthDist(median=16, kind="fixed"),
                           structured_output=StructuredOutput(mode=mode, schemas=4))  # type: ignore[arg-type]


def test_structured_prompts_name_their_schema_and_keep_their_token_count() -> None:
    bench = BenchSpec(num_prompts=30, warmup_requests=2)
    plain_warm, plain = build_prompts(_workload("none"), bench, MODEL)
    for mode in ("prompt_only", "json_schema"):
        warm, measured = build_prompts(_workload(mode), bench, MODEL)
        assert [len(p.text.split()) for p in measured] == [len(p.text.split()) for p in plain]
        for prompt in [*warm, *measured]:
            assert 0 <= prompt.schema < 4 and prompt.constrained == (mode == "json_schema")
            assert prompt_schema(prompt.text) == schema_for(prompt.schema)
        assert warm[-1].text == measured[0].text  # bench_serving's warm-up copies the first row
    assert all(p.schema == -1 and PROMPT_MARKER not in p.text for p in [*plain_warm, *plain])


def test_only_a_constrained_request_carries_its_schema() -> None:
    _, measured = build_prompts(_workload("json_schema"), BenchSpec(num_prompts=2), MODEL)
    request = measured[0]
    native = payload("sglang", request, "m", True)
    assert json.loads(native["sampling_params"]["json_schema"]) == schema_for(request.schema)
    chat = payload("sglang-oai-chat", request, "m", True)
    assert chat["response_format"]["type"] == "json_schema"
    assert chat["response_format"]["json_schema"]["schema"] == schema_for(request.schema)
    _, loose = build_prompts(_workload("prompt_only"), BenchSpec(num_prompts=2), MODEL)
    assert "json_schema" not in payload("sglang", loose[0], "m", True)["sampling_params"]
    assert "response_format" not in payload("sglang-oai", loose[0], "m", True)


def _stream(chunks: list[str], cumulative: bool) -> bytes:
    events, text = [], ""
    for count, piece in enumerate(chunks, start=1):
        text = f"{text} {piece}".strip()
        body = {"text": text if cumulative else (piece if count == 1 else " " + piece),
                "meta_info": {"completion_tokens": count, "prompt_tokens": 3}}
        events.append(b"data: " + json.dumps(body).encode() + b"\n\n")
    return b"".join(events) + b"data: [DONE]\n\n"


@pytest.mark.parametrize("cumulative", [True, False])
def test_the_audit_reads_cumulative_and_delta_streams_alike(cumulative: bool) -> None:
    pieces = document_pieces(schema_for(2), 25)
    broken = document_pieces(schema_for(2), 25, "required")
    request = PromptRequest(index=0, text="ba be", prompt_tokens=2, output_tokens=25, schema=2)

    async def go(chunks: list[str]) -> str:
        with respx.mock() as mock:
            mock.post("http://h/generate").mock(return_value=httpx.Response(200, content=_stream(chunks, cumulative)))
            async with httpx.AsyncClient() as client:
                outcome = await send_request(client, "http://h", "sglang", request, model="m")
        assert outcome.success and outcome.output_tokens == 25
        return outcome.invalid_json

    assert asyncio.run(go(pieces)) == ""
    assert asyncio.run(go(broken)) == "required"
