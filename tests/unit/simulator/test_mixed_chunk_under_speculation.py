"""`--enable-mixed-chunk` under EAGLE-family speculation, by SGLang version.

Up to 0.5.18 `_handle_eagle_family` turns mixed chunk off under EAGLE, EAGLE3 and NEXTN ("Mixed chunked
prefill is disabled because of using eagle speculative decoding"); from 0.5.19 it stays on where the
algorithm's `supports_mixed_chunk()` says so (EAGLE and EAGLE3; NEXTN aliases EAGLE), and a mixed step
carries the running requests as a plain 1-token decode. The simulator and the chunk step follow the version.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import ChunkedPrefill
from service.domain import ServerConfig, resolve_model
from service.simulator.speculative import keeps_mixed_chunk, speculative_settings
from tests.unit.techniques.scenarios import context, deployment, scenario

from .conftest import load, run

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4}


def test_the_version_decides_whether_mixed_chunk_survives_speculation() -> None:
    assert [keeps_mixed_chunk(v) for v in ("0.5.2", "0.5.15", "0.5.18", "0.5.19", "0.5.23")] == [
        False, False, False, True, True]
    model = resolve_model("Qwen/Qwen3.6-27B")
    mixed = ServerConfig(enable_mixed_chunk=True, **EAGLE3)
    assert speculative_settings(mixed, model, 0.7, "0.5.23").mixes_chunks
    assert not speculative_settings(mixed, model, 0.7, "0.5.15").mixes_chunks
    assert not speculative_settings(ServerConfig(**EAGLE3), model, 0.7, "0.5.23").mixes_chunks


def test_a_mixed_step_under_eagle3_decodes_the_running_requests_through_long_prefills() -> None:
    # Casebook case 1's coding traffic (long pastes) on TP8 with EAGLE3 and mixed chunk: on 0.5.23 the running
    # requests emit a token in every prefill step, so the longest gap between tokens shrinks; on 0.5.15 the
    # flag is off and they wait through each chunk, as without it.
    base = load("coding-assistant-round0")
    group = base.deployment.groups[0]
    server = msgspec.structs.replace(group.server, chunked_prefill_size=4096, enable_mixed_chunk=True, **EAGLE3)
    spec = msgspec.structs.replace(base, deployment=msgspec.structs.replace(
        base.deployment, groups=[msgspec.structs.replace(group, server=server)]))
    new, old = run(msgspec.structs.replace(spec, sglang_version="0.5.23")), run(
        msgspec.structs.replace(spec, sglang_version="0.5.15"))
    unmixed = msgspec.structs.replace(spec, deployment=msgspec.structs.replace(spec.deployment, groups=[
        msgspec.structs.replace(group, server=msgspec.structs.replace(server, enable_mixed_chunk=False))]))
    assert old.bench.max_itl_ms == run(msgspec.structs.replace(unmixed, sglang_version="0.5.15")).bench.max_itl_ms
    assert new.bench.max_itl_ms < 0.8 * old.bench.max_itl_ms, (new.bench.max_itl_ms, old.bench.max_itl_ms)


def test_the_chunk_step_offers_mixed_chunk_under_eagle3_only_where_sglang_keeps_it() -> None:
    def offered(version: str) -> list[str]:
        dep = deployment("Qwen/Qwen3.6-27B", tp=8, **EAGLE3)
        scen = msgspec.structs.replace(scenario("Qwen/Qwen3.6-27B", "H200-SXM", 8, dep, clients=25),
                                       sglang_version=version)
        return [d.summary for d in ChunkedPrefill().propose(context(scen))]
    assert any(s.endswith("+ mixed chunk") for s in offered("0.5.23"))
    assert not any("mixed" in s for s in offered("0.5.15"))


def test_speculation_added_on_an_older_version_drops_the_mixed_chunk_flag_sglang_ignores() -> None:
    from plugins.techniques import SpeculativeDecoding

    def added(version: str) -> tuple[dict, str]:
        dep = deployment("Qwen/Qwen3.6-9B", tp=1, chunked_prefill_size=4096, enable_mixed_chunk=True)
        scen = msgspec.structs.replace(scenario("Qwen/Qwen3.6-9B", "H100-SXM", 1, dep, clients=16),
                                       sglang_version=version)
        [delta] = SpeculativeDecoding().propose(context(scen))
        return delta.set_server, delta.summary
    old, summary = added("0.5.15")
    assert old["speculative_algorithm"] == "EAGLE3" and old["enable_mixed_chunk"] is False
    assert summary.endswith(", mixed chunk off (SGLang 0.5.15 turns it off under speculation)")
    new, summary = added("0.5.23")
    assert "enable_mixed_chunk" not in new and "mixed" not in summary


def test_a_pd_deployment_sweeps_its_prefill_servers_chunk_without_mixed_chunk() -> None:
    # Mixed chunk carries running decodes in a chunk's forward pass; a PD prefill server runs none, so the
    # step offers the chunk alone (a 9B started as one prefill and one decode TP1 server on two H100s measured
    # "4096" and "4096 + mixed chunk" to the same figures). The sweep reads the prefill server's chunk.
    from service.domain import Deployment, RouterConfig, WorkerGroup

    model = "Qwen/Qwen3.6-9B"
    prefill = WorkerGroup(name="prefill", role="prefill", base_port=30001, bootstrap_port=8998,
                          server=ServerConfig(model_path=model, tp_size=1, chunked_prefill_size=8192))
    decode = WorkerGroup(name="decode", role="decode", base_port=30011, server=ServerConfig(model_path=model))
    pd = Deployment(groups=[prefill, decode], router=RouterConfig(policy="round_robin", port=30000))
    scen = scenario(model, "H100-SXM", 2, pd, clients=32)
    summaries = [d.summary for d in ChunkedPrefill().propose(context(scen))]
    assert summaries == ["chunked prefill 4096"]
    # The same server unified, at SGLang's default chunk for an 80 GB GPU: mixed chunk is the first step.
    unified = scenario(model, "H100-SXM", 2, deployment(model), clients=32)
    assert [d.summary for d in ChunkedPrefill().propose(context(unified))] == [
        "chunked prefill 8192 + mixed chunk", "chunked prefill 4096"]
