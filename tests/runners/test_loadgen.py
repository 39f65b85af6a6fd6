"""The load generator: bench_serving's timing rules, and HTTP faults a real server cannot produce on demand."""

from __future__ import annotations

import asyncio
import time

import httpx
import msgspec
import numpy as np
import pytest
import respx

from service.domain import (
    BenchSpec,
    DocumentSet,
    LengthDist,
    PrefixStructure,
    TraceRecord,
    TraceSpec,
    WorkloadProfile,
    resolve_model,
)
from service.loadgen import (
    LoadAborted,
    LoadPlan,
    PhaseResult,
    PromptRequest,
    RequestOutcome,
    bench_figures,
    build_prompts,
    run_load,
    send_request,
)

BASE = "http://127.0.0.1:30000"
REQUEST = PromptRequest(index=0, text="ba be bi", prompt_tokens=3, output_tokens=3)


def _native(count: int, finished: bool = False) -> bytes:
    meta = {"completion_tokens": count, "prompt_tokens": 3, "cached_tokens": 2,
            "finish_reason": {"type": "length", "length": count} if finished else None}
    return b"data: " + msgspec.json.encode({"text": "x " * count, "meta_info": meta}) + b"\n\n"


def _send(stream: list[bytes], backend: str = "sglang", status: int = 200) -> RequestOutcome:
    path = {"sglang": "/generate", "sglang-oai": "/v1/completions"}[backend]
    ticks = iter(range(100))

    async def go() -> RequestOutcome:
        with respx.mock(assert_all_called=True) as mock:
            mock.post(BASE + path).mock(return_value=httpx.Response(status, content=b"".join(stream)))
            async with httpx.AsyncClient() as client:
                # A fake clock: every reading is one second after the previous one.
                return await send_request(client, BASE, backend, REQUEST, model="m", clock=lambda: float(next(ticks)))

    return asyncio.run(go())


def test_native_stream_splits_each_gap_over_its_new_tokens() -> None:
    outcome = _send([_native(1), _native(1), _native(3, finished=True), b"data: [DONE]\n\n"])
    assert outcome.success
    # Clock reads: start 0, first chunk 1 (TTFT), repeat without new tokens skipped, third chunk 3 -> 2 tokens.
    assert outcome.ttft == 1.0
    assert outcome.itl == [1.0, 1.0]
    assert (outcome.output_tokens, outcome.cached_tokens) == (3, 2)


def test_openai_stream_takes_one_gap_per_chunk_and_usage_lengths() -> None:
    def chunk(text: str) -> bytes:
        return b"data: " + msgspec.json.encode({"choices": [{"index": 0, "text": text}]}) + b"\n\n"

    usage = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,' \
            b'"prompt_tokens_details":{"cached_tokens":1}}}\n\n'
    outcome = _send([chunk("a"), chunk("b c"), chunk("d"), usage, b"data: [DONE]\n\n"], backend="sglang-oai")
    assert outcome.success and outcome.ttft == 1.0
    assert outcome.itl == [1.0, 1.0]
    assert (outcome.output_tokens, outcome.cached_tokens) == (4, 1)


@pytest.mark.parametrize(("stream", "status", "reason"), [
    ([_native(1), _native(2)], 200, "truncated"),
    ([_native(1), b'data: {"error":{"message":"Internal server error"}}\n\n', b"data: [DONE]\n\n"], 200,
     "server error mid-stream: Internal server error"),
    ([_native(1), b"data: {\"text\": \"x\", \"meta_info\": \n\n"], 200, "malformed JSON"),
    ([b"Internal Server Error"], 500, "HTTP 500"),
])
def test_http_faults_fail_the_request_with_the_reason(stream: list[bytes], status: int, reason: str) -> None:
    outcome = _send(stream, status=status)
    assert not outcome.success
    assert reason in outcome.error


def test_a_connection_cut_mid_stream_fails_the_request() -> None:
    async def go() -> RequestOutcome:
        async def body():  # type: ignore[no-untyped-def]
            yield _native(1)
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

        with respx.mock() as mock:
            mock.post(BASE + "/generate").mock(return_value=httpx.Response(200, stream=_AsyncStream(body())))
            async with httpx.AsyncClient() as client:
                return await send_request(client, BASE, "sglang", REQUEST, model="m")

    outcome = asyncio.run(go())
    assert not outcome.success and "peer closed connection" in outcome.error


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, chunks) -> None:  # type: ignore[no-untyped-def]
        self.chunks = chunks

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        async for chunk in self.chunks:
            yield chunk


def test_figures_follow_bench_serving_and_the_time_scale() -> None:
    outcomes = [RequestOutcome(success=True, prompt_tokens=100, output_tokens=11, ttft=0.1, latency=1.1,
                               itl=[0.1] * 10, started=0.0),
                RequestOutcome(success=True, prompt_tokens=100, output_tokens=11, ttft=0.3, latency=1.3,
                               itl=[0.1] * 10, started=0.5),
                RequestOutcome(success=False, error="HTTP 500")]
    figures = bench_figures(outcomes, duration=2.0, time_scale=0.5)
    assert figures.completed == 2
    assert figures.duration == pytest.approx(4.0)  # emulated seconds: wall / time scale
    assert figures.median_ttft_ms == pytest.approx(400.0)
    assert figures.mean_tpot_ms == pytest.approx(200.0)  # (latency - ttft) / (output - 1), scaled
    assert figures.output_throughput == pytest.approx(22 / 4.0)
    assert figures.concurrency == pytest.approx((2.2 + 2.6) / 4.0)
    assert figures.max_concurrent_requests == 2


def test_prompts_share_text_exactly_where_the_layout_shares_blocks() -> None:
    workload = WorkloadProfile(input=LengthDist(median=300, kind="fixed"), output=LengthDist(median=8, kind="fixed"),
                               prefix=PrefixStructure(system_prompt_tokens=50,
                                                      documents=DocumentSet(count=2, tokens=100)))
    warm, measured = build_prompts(workload, BenchSpec(num_prompts=20, warmup_requests=2),
                                   resolve_model("Qwen/Qwen3.6-27B"), seed=1)
    assert len(warm) == 2 and len(measured) == 20
    assert all(len(p.text.split()) == p.prompt_tokens == 300 for p in measured)
    heads = {" ".join(p.text.split()[:150]) for p in measured}
    assert len(heads) == 2  # one shared head per document
    assert len({p.text for p in measured}) == 20  # every question is its own


def _documents_workload() -> WorkloadProfile:
    return WorkloadProfile(input=LengthDist(median=300, kind="fixed"), output=LengthDist(median=4, kind="fixed"),
                           prefix=PrefixStructure(system_prompt_tokens=50, documents=DocumentSet(count=3, tokens=100)))


def test_warm_prompts_are_the_workloads_traffic_never_a_measured_prompt() -> None:
    bench = BenchSpec(num_prompts=20, warmup_requests=2, warm_prompts=30)
    warm, measured = build_prompts(_documents_workload(), bench, resolve_model("Qwen/Qwen3.6-27B"), seed=1)
    served = [p for p in warm if p.served]
    assert len(served) == 30 and warm[:30] == served and len(measured) == 20
    assert all(p.warmup and not p.served and p.text == measured[0].text for p in warm[30:])
    # Same documents as the measured traffic, never the same question.
    assert {p.text.split()[50] for p in served} & {p.text.split()[50] for p in measured}
    assert not {p.text for p in served} & {p.text for p in measured}


def _recording_server(sent: list[str], *, hold: float = 0.0) -> respx.MockRouter:
    """A /generate that answers every request with a short stream, after `hold` seconds."""
    async def body():  # type: ignore[no-untyped-def]
        if hold:
            await asyncio.sleep(hold)
        for chunk in (_native(1), _native(2, finished=True), b"data: [DONE]\n\n"):
            yield chunk

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(msgspec.json.decode(request.content)["text"])
        return httpx.Response(200, stream=_AsyncStream(body()))

    mock = respx.mock()
    mock.post(BASE + "/generate").mock(side_effect=answer)
    return mock


def test_served_traffic_goes_first_and_stays_out_of_the_measured_phase() -> None:
    bench = BenchSpec(num_prompts=6, warmup_requests=1, warm_prompts=5, max_concurrency=2)
    warm, measured = build_prompts(_documents_workload(), bench, resolve_model("Qwen/Qwen3.6-27B"), seed=3)
    sent: list[str] = []

    async def between(client: httpx.AsyncClient) -> None:
        sent.append("<scrape>")

    async def go() -> tuple[PhaseResult, PhaseResult]:
        with _recording_server(sent):
            return await run_load(LoadPlan(base_url=BASE, max_concurrency=2), warm, measured, between=between)

    warmed, load = asyncio.run(go())
    assert sent == [p.text for p in warm] + ["<scrape>"] + [p.text for p in measured]
    assert len(warmed.outcomes) == 6 and len(load.outcomes) == 6 and all(o.success for o in load.outcomes)


def test_served_traffic_that_overruns_its_deadline_is_named() -> None:
    bench = BenchSpec(num_prompts=2, warmup_requests=1, warm_prompts=2)
    warm, measured = build_prompts(_documents_workload(), bench, resolve_model("Qwen/Qwen3.6-27B"), seed=3)
    sent: list[str] = []

    async def go() -> None:
        with _recording_server(sent, hold=5.0):
            await run_load(LoadPlan(base_url=BASE, warm_prompts_deadline=0.2), warm, measured)

    with pytest.raises(LoadAborted) as aborted:
        asyncio.run(go())
    assert (aborted.value.cause, aborted.value.phase) == ("deadline", "warm_prompts")
    assert sent == [p.text for p in warm[:2]]  # neither the warm-up nor the measured requests were sent


def _timed_sends(plan: LoadPlan, measured: list[PromptRequest]) -> list[float]:
    """Wall seconds after the first send at which each measured request reached the server."""
    stamps: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        stamps.append(time.perf_counter())
        return httpx.Response(200, content=_native(1) + _native(2, finished=True) + b"data: [DONE]\n\n")

    async def go() -> None:
        with respx.mock() as mock:
            mock.post(BASE + "/generate").mock(side_effect=answer)
            await run_load(plan, [], measured)

    asyncio.run(go())
    return [t - stamps[0] for t in stamps]


def test_a_trace_is_sent_at_its_own_times_on_the_emulators_clock() -> None:
    records = [TraceRecord(timestamp=ms, input_length=40, output_length=2, hash_ids=[1]) for ms in (0, 400, 800)]
    bench = BenchSpec(dataset="trace", num_prompts=3, warmup_requests=0, trace=TraceSpec(records=records))
    warm, measured = build_prompts(WorkloadProfile(), bench, resolve_model("Qwen/Qwen3.6-27B"))
    assert warm == [] and [p.arrival for p in measured] == [0.0, 0.4, 0.8]
    assert len({" ".join(p.text.split()[:40]) for p in measured}) == 1  # one shared block, one text
    sends = _timed_sends(LoadPlan(base_url=BASE, time_scale=0.5), measured)  # half a wall second per second
    assert sends[1] == pytest.approx(0.2, abs=0.05) and sends[2] == pytest.approx(0.4, abs=0.05)


def test_poisson_gaps_are_stretched_to_the_emulators_clock() -> None:
    measured = [PromptRequest(index=k, text="ba be", prompt_tokens=2, output_tokens=2) for k in range(20)]
    # 20 requests at 10 per emulated second: about 1.9 emulated seconds of gaps, 3.8 wall seconds at scale 2.
    sends = _timed_sends(LoadPlan(base_url=BASE, request_rate=10.0, time_scale=2.0, seed=5), measured)
    rng_gaps = np.random.default_rng(5).exponential(0.1, size=20)[:19].sum()
    assert sends[-1] == pytest.approx(2.0 * rng_gaps, rel=0.1)
