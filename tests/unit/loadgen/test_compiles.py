"""The emulator's grammar compiles: a cache per server, and xgrammar's shared in-flight compile."""

from __future__ import annotations

import asyncio

from service.emulator.compiles import GrammarCompiles, schema_key
from service.loadgen.schemas import schema_for
from service.simulator.grammar import solo_compile_seconds


def _burst(backend: str, requests: int) -> GrammarCompiles:
    compiles = GrammarCompiles(backend, time_scale=0.01)

    async def go() -> None:
        await asyncio.gather(*(compiles.wait(schema_for(3)) for _ in range(requests)))
        await compiles.wait(schema_for(3))  # cached by now

    asyncio.run(go())
    return compiles


def test_xgrammar_compiles_a_schema_once_for_requests_that_arrive_together() -> None:
    assert _burst("xgrammar", 5).compiled == 1


def test_llguidance_compiles_again_for_every_request_before_the_first_is_done() -> None:
    assert _burst("llguidance", 5).compiled == 5


def test_a_loadgen_schema_compiles_as_long_as_the_simulator_says() -> None:
    key, schema_id = schema_key(schema_for(7))
    assert schema_id == 7 and key == schema_key(schema_for(7))[0]
    assert 0.01 < solo_compile_seconds("xgrammar", schema_id) < 2.0
