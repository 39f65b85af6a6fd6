"""Server start-up memory checks, EAGLE's running-request cap, and slowly varying front fields."""

from __future__ import annotations

import msgspec
import pytest

from service.domain import PrefixStructure, resolve_model
from service.simulator.memory import ServerStartError, resolve_server
from service.simulator.requests import PERIOD_BASE, SimRequest, layout_blocks, stamp_period

from .conftest import load, run

BATCH = load("nightly-batch-round0")


def _nine_b_server(**flags: object):  # type: ignore[no-untyped-def]
    base = msgspec.structs.replace(BATCH.deployment.groups[0].server, speculative_algorithm=None)
    return msgspec.structs.replace(base, chunked_prefill_size=32768, max_running_requests=512,
                                   max_prefill_tokens=65536, **flags)


def test_mem_fraction_leaving_no_room_for_a_chunk_fails_at_start() -> None:
    model = resolve_model("Qwen/Qwen3.6-9B")
    assert resolve_server(model, BATCH.hardware, _nine_b_server(mem_fraction_static=0.94)).pool_tokens > 0
    with pytest.raises(ServerStartError, match="out of memory at start.*32768-token"):
        resolve_server(model, BATCH.hardware, _nine_b_server(mem_fraction_static=0.96))


def test_failed_start_is_a_failed_round_in_phase_start() -> None:
    group = msgspec.structs.replace(BATCH.deployment.groups[0], server=_nine_b_server(mem_fraction_static=0.97))
    scenario = msgspec.structs.replace(BATCH, model="Qwen/Qwen3.6-9B",
                                       deployment=msgspec.structs.replace(BATCH.deployment, groups=[group]))
    result = run(scenario)
    assert result.status == "failed" and result.error_phase == "start"
    assert "GiB" in (result.error or "")


def test_eagle_caps_unset_max_running_requests_at_48() -> None:
    model = resolve_model(BATCH.model)
    spec_server = BATCH.deployment.groups[0].server
    assert resolve_server(model, BATCH.hardware, spec_server).max_running_requests == 48
    explicit = msgspec.structs.replace(spec_server, max_running_requests=256)
    assert resolve_server(model, BATCH.hardware, explicit).max_running_requests == 256


def test_front_fields_with_a_period_are_shared_within_it_and_differ_across_it() -> None:
    prefix = PrefixStructure(system_prompt_tokens=500, variable_tokens=40, variable_position="front",
                             variable_period_s=60.0)
    reqs = [SimRequest(rid=i, blocks=layout_blocks(prefix, 2000, i, -1, -1), input_len=2000, output_len=1,
                       max_new_tokens=1) for i in range(3)]
    for r, t in zip(reqs, (5.0, 59.0, 61.0), strict=True):
        stamp_period(r, t, prefix.variable_period_s)
    assert reqs[0].blocks[:2] == reqs[1].blocks[:2]
    assert reqs[0].blocks[0] != reqs[2].blocks[0]
    assert reqs[0].blocks[0][0] == PERIOD_BASE
    per_request = PrefixStructure(system_prompt_tokens=500, variable_tokens=40, variable_position="front")
    assert layout_blocks(per_request, 2000, 1, -1, -1)[0] != layout_blocks(per_request, 2000, 2, -1, -1)[0]
