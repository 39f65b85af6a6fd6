"""Round figures from SGLang's structured metrics: tiers, summaries, the accept-length gauge, failed scrapes."""

from __future__ import annotations

import asyncio
import socket

import httpx
import respx

from plugins.runners.local.scrape import counter_deltas, missing_note, parse_metrics, scrape, server_metrics

LABELS = 'model_name="m",engine_type="unified"'
SCHED = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'


def _text(prompt: float, device: float, host: float, passes: float, balance_sum: float, accept: float) -> str:
    """A 0.5.23-shaped exposition: the counter by `cache_source`, the Summary by `forward_mode`, gauges."""
    return "\n".join([
        "# TYPE sglang:prompt_tokens_total counter",
        f'sglang:prompt_tokens_total{{{LABELS},is_streaming="true"}} {prompt}',
        "# TYPE sglang:cached_tokens_total counter",
        f'sglang:cached_tokens_total{{{LABELS},cache_source="device"}} {device}',
        f'sglang:cached_tokens_total{{{LABELS},cache_source="host"}} {host}',
        "# TYPE sglang:eplb_balancedness summary",
        f'sglang:eplb_balancedness_count{{{SCHED},forward_mode="decode"}} {passes}',
        f'sglang:eplb_balancedness_sum{{{SCHED},forward_mode="decode"}} {balance_sum}',
        "# TYPE sglang:kv_transfer_latency_ms histogram",
        f'sglang:kv_transfer_latency_ms_bucket{{{SCHED},le="+Inf"}} {passes}',
        f'sglang:kv_transfer_latency_ms_count{{{SCHED}}} {passes}',
        f'sglang:kv_transfer_latency_ms_sum{{{SCHED}}} {passes * 4.0}',
        "# TYPE sglang:spec_accept_length gauge",
        f"sglang:spec_accept_length{{{SCHED}}} {accept}",
    ]) + "\n"


def test_tiers_summaries_and_the_gauge_are_the_rounds_own() -> None:
    before = parse_metrics(_text(1000, 100, 0, 10, 9.0, 0.0))
    after = parse_metrics(_text(5000, 2100, 400, 110, 89.0, 2.5))
    assert before["cached_tokens_total"] == 100 and after["cached_tokens_total:host"] == 400
    server = server_metrics(counter_deltas([before], [after]), [], workers=1)
    assert server.cache_hit_rate == (2000 + 400) / 4000
    assert server.cache_hit_rate_by_tier == {"device": 0.5, "host": 0.1}
    # The growth of _sum over that of _count: passes of the round only, not the server's lifetime.
    assert server.eplb_balancedness == (89.0 - 9.0) / 100
    assert server.kv_transfer_latency_ms == 4.0
    assert server.spec_accept_length == 2.5 and server.missing == []


@respx.mock
def test_a_failed_scrape_is_asked_again() -> None:
    route = respx.get("http://w1/metrics").mock(side_effect=[httpx.ConnectError("refused"),
                                                             httpx.Response(200, text=_text(10, 1, 0, 1, 1, 0))])

    async def go() -> list[dict[str, float] | None]:
        async with httpx.AsyncClient() as client:
            return await scrape(client, ["http://w1"])

    readings = asyncio.run(go())
    assert route.call_count == 2 and readings[0] is not None and readings[0]["prompt_tokens_total"] == 10


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_before_scrape_that_fails_twice_leaves_the_counters_missing_not_lifetime() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"  # nothing listens: connection refused, twice

    async def go() -> list[dict[str, float] | None]:
        async with httpx.AsyncClient() as client:
            return await scrape(client, [url])

    before = asyncio.run(go())
    assert before == [None]
    lifetime = parse_metrics(_text(90000, 60000, 5000, 900, 800.0, 0.0))
    deltas = counter_deltas(before, [lifetime])
    server = server_metrics(deltas, [], workers=1)
    assert server.cache_hit_rate == 0.0 and server.cache_hit_rate_by_tier is None  # not 65000 / 90000
    assert "cache_hit_rate" in server.missing and "eplb_balancedness" in server.missing
    note = missing_note(deltas, 1)
    assert note is not None and "missing, not lifetime totals" in note


def test_one_lost_worker_of_two_is_left_out_and_named() -> None:
    good_before, good_after = parse_metrics(_text(100, 0, 0, 0, 0, 0)), parse_metrics(_text(1100, 500, 0, 0, 0, 0))
    lifetime = parse_metrics(_text(90000, 90000, 0, 0, 0, 0))
    deltas = counter_deltas([good_before, None], [good_after, lifetime])
    server = server_metrics(deltas, [], workers=2)
    assert server.cache_hit_rate == 0.5 and server.missing == []
    note = missing_note(deltas, 2)
    assert note is not None and "1 of 2 workers" in note
