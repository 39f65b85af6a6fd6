"""The streaming client against a real HTTP server on loopback that speaks server-sent events the way a
proxy in front of SGLang does: comments and blank keep-alives between events, `event:`/`id:`/`retry:`
fields, events split over several writes. None of it is a token, and none of it moves TTFT or an ITL gap."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import httpx
import msgspec
import pytest

from service.loadgen import PromptRequest, RequestOutcome, send_request

REQUEST = PromptRequest(index=0, text="ba be bi", prompt_tokens=3, output_tokens=3)
DONE = b"data: [DONE]\n\n"


def native(count: int) -> bytes:
    meta = {"completion_tokens": count, "prompt_tokens": 3, "cached_tokens": 2}
    return b"data: " + msgspec.json.encode({"text": "x " * count, "meta_info": meta}) + b"\n\n"


def chat(text: str) -> bytes:
    return b"data: " + msgspec.json.encode({"choices": [{"index": 0, "delta": {"content": text}}]}) + b"\n\n"


class SSEServer:
    """Answers every POST with `pieces`, each written (and flushed) as its own HTTP chunk."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.pieces = list(pieces)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.url = ""

    async def __aenter__(self) -> SSEServer:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
        body = await reader.readexactly(int(length.group(1))) if length else b""
        self.requests.append((head.split(b" ")[1].decode(), msgspec.json.decode(body)))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        for piece in self.pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.002)  # separate TCP segments, as a proxy flushing each write sends them
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()


def send(pieces: Sequence[bytes], backend: str = "sglang") -> tuple[RequestOutcome, int, SSEServer]:
    """The outcome on a fake clock (each reading one second after the last) and how often it was read."""
    readings = iter(range(1000))
    read: list[int] = []

    def clock() -> float:
        read.append(next(readings))
        return float(read[-1])

    async def go() -> tuple[RequestOutcome, SSEServer]:
        async with SSEServer(pieces) as server, httpx.AsyncClient() as client:
            return await send_request(client, server.url, backend, REQUEST, model="m", clock=clock), server

    outcome, server = asyncio.run(go())
    return outcome, len(read), server


def test_a_plain_stream_from_a_real_server_is_timed_as_bench_serving_times_it() -> None:
    outcome, readings, server = send([native(1), native(1), native(3), DONE])
    assert outcome.success and outcome.ttft == 1.0 and outcome.itl == [1.0, 1.0]
    assert (outcome.output_tokens, outcome.cached_tokens) == (3, 2)
    assert readings == 5  # start, three events, end
    assert server.requests[0][0] == "/generate"


def test_comments_and_blank_keep_alives_are_not_tokens_and_leave_the_timing_alone() -> None:
    plain, plain_readings, _ = send([native(1), native(1), native(3), DONE])
    proxied, readings, _ = send([b": keep-alive\n\n", b":ping\n", b"\n", native(1), b": keep-alive\n\n", b"\n\n",
                                 b"id: 7\nretry: 3000\n", native(1), b":\n", b"event: message\n", native(3),
                                 b": keep-alive\n\n", DONE, b": bye\n\n"])
    assert proxied.success
    assert (proxied.ttft, proxied.itl, proxied.output_tokens) == (plain.ttft, plain.itl, plain.output_tokens)
    assert readings == plain_readings


def test_an_openai_chat_stream_behind_a_proxy_counts_one_gap_per_content_event() -> None:
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}\n\n'
    outcome, readings, server = send(
        [b":ping\n\n", chat("a"), b"\n", b": keep-alive\n\n", chat("b"), b"id: 3\n", chat("c"), usage, DONE],
        backend="sglang-oai-chat")
    assert outcome.success and outcome.ttft == 1.0 and outcome.itl == [1.0, 1.0]
    assert outcome.output_tokens == 3 and readings == 6  # start, three chunks, usage, end
    assert server.requests[0][0] == "/v1/chat/completions"


def test_events_split_over_writes_and_data_over_lines_are_joined() -> None:
    first = native(1)
    outcome, _, _ = send([first[:9], first[9:25], first[25:], b'data: {"text": "x x x",\n',
                          b'data: "meta_info": {"completion_tokens": 3}}\n\n', b"data: [DO", b"NE]\n\n"])
    # One second after the first token, two more arrive together: the gap is split over them.
    assert outcome.success and outcome.ttft == 1.0 and outcome.itl == [0.5, 0.5] and outcome.output_tokens == 3


def test_another_type_of_event_carries_no_token() -> None:
    outcome, readings, _ = send([b'event: ping\ndata: {"text": "x"}\n\n', native(1), native(2), DONE])
    assert outcome.success and outcome.ttft == 1.0 and outcome.itl == [1.0] and readings == 4


def test_a_last_event_without_its_blank_line_still_counts() -> None:
    outcome, _, _ = send([native(1), b"data: [DONE]\n"])
    assert outcome.success


@pytest.mark.parametrize(("pieces", "reason"), [
    ([native(1), b'event: error\ndata: {"message": "upstream timed out"}\n\n', DONE],
     "server error mid-stream: upstream timed out"),
    ([native(1), b"event: error\ndata: upstream closed\n\n", DONE], "server error mid-stream: upstream closed"),
    ([native(1), b": keep-alive\n\n", b": keep-alive\n\n"], "truncated"),
    ([b"<html>502 Bad Gateway</html>\n", DONE], "unexpected line in the event stream"),
])
def test_faults_behind_a_proxy_fail_the_request_with_the_reason(pieces: list[bytes], reason: str) -> None:
    outcome, _, _ = send(pieces)
    assert not outcome.success and reason in outcome.error


def test_only_data_counts_as_progress_so_keep_alives_cannot_hide_a_stalled_server() -> None:
    ticks: list[None] = []
    pieces = [b": keep-alive\n\n", b":ping\n", b"\n", native(1), b": keep-alive\n\n", b"id: 2\n", native(2), DONE]

    async def go() -> RequestOutcome:
        async with SSEServer(pieces) as server, httpx.AsyncClient() as client:
            return await send_request(client, server.url, "sglang", REQUEST, model="m",
                                      on_progress=lambda: ticks.append(None))

    assert asyncio.run(go()).success
    assert len(ticks) == 3  # two token events and [DONE]
