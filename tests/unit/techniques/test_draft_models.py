"""EAGLE3 needs a draft trained for the target model: named by the scenario, or known for the model, never made up.

A draft reads the target's hidden states and shares its vocabulary, so `Llama-3.1-8B-eagle3` is not a draft
because the name says so: a server launched with a draft that does not exist never starts, and a job that
kept it would hand over a final configuration that cannot launch.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from plugins.techniques.model_selection import ModelSelection
from plugins.techniques.speculative_decoding import SpeculativeDecoding
from service import SLO, QualityResult, SpeculativeBehaviour, check_scenario, known_draft
from service.engine.delta import apply_delta
from service.sglang import errors
from tests.unit.techniques.scenarios import context, deployment, measured, scenario

SPEC = SpeculativeDecoding()
LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
            "vocab_size": 128256, "max_position_embeddings": 131072, "head_dim": 128}


def _folder(tmp_path: Path, name: str, **config: object) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**LLAMA_8B, **config}))
    return str(folder)


def _with_draft(scen, draft: str | None):  # type: ignore[no-untyped-def]
    speculative = SpeculativeBehaviour(draft_acceptance=0.7, draft_model=draft)
    return msgspec.structs.replace(scen, workload=msgspec.structs.replace(scen.workload, speculative=speculative))


def test_a_model_with_no_known_draft_gets_no_speculative_decoding(tmp_path: Path) -> None:
    model = _folder(tmp_path, "llama-8b")
    scen = scenario(model, "H100-SXM", 1, deployment(model), clients=8, slo=SLO(itl_median_ms=30))
    rule = SPEC.applicable(context(scen))
    # 8 streams on an H100 (threshold batch 295) is where the casebook adds EAGLE3, but nothing names a draft.
    assert not rule.applicable
    assert "No EAGLE3 draft model is known" in rule.reason and "workload.speculative.draft_model" in rule.reason


def test_the_scenarios_draft_is_used_and_a_missing_draft_folder_is_refused(tmp_path: Path) -> None:
    model = _folder(tmp_path, "llama-8b")
    base = scenario(model, "H100-SXM", 1, deployment(model), clients=8, slo=SLO(itl_median_ms=30))
    named = _with_draft(base, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert SPEC.applicable(context(named)).applicable
    [delta] = SPEC.propose(context(named))
    assert delta.set_server["speculative_draft_model_path"] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    # A draft given as a folder must hold a config.json, as the model's folder must.
    missing = errors(check_scenario(_with_draft(base, f"{model}-eagle3")))
    assert [i.field for i in missing] == ["workload.speculative.draft_model"] and "config.json" in missing[0].message
    flag = errors(check_scenario(_with_draft(base, "--trust-remote-code")))
    assert [i.field for i in flag] == ["workload.speculative.draft_model"] and "flag" in flag[0].message
    local = _folder(tmp_path, "llama-8b-draft")
    assert not errors(check_scenario(_with_draft(base, local)))
    # The same check holds for a draft already on the server.
    on = scenario(model, "H100-SXM", 1, deployment(model, speculative_algorithm="EAGLE3",
                                                   speculative_draft_model_path=f"{model}-eagle3"), clients=8)
    assert [i.field for i in errors(check_scenario(on))] == [
        "deployment.groups[0].server.speculative-draft-model-path"]


def test_a_shipped_model_uses_its_known_draft() -> None:
    # Casebook case 1 round 3: Qwen/Qwen3.6-27B-eagle3, from the model's model.toml.
    model = "Qwen/Qwen3.6-27B"
    scen = scenario(model, "H200-SXM", 8, deployment(model, tp=8), clients=25)
    [delta] = SPEC.propose(context(scen))
    assert delta.set_server["speculative_draft_model_path"] == "Qwen/Qwen3.6-27B-eagle3" == known_draft(model)
    assert known_draft("Qwen/Qwen3.6-35B-A3B") == ""


def test_a_model_switch_takes_the_new_models_draft_or_stops_speculating() -> None:
    # Casebook case 3 round 1: 27B with its EAGLE3 draft -> 9B keeps speculating with the 9B's own draft.
    model = "Qwen/Qwen3.6-27B"
    eagle = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "Qwen/Qwen3.6-27B-eagle3",
             "speculative_num_steps": 5, "speculative_eagle_topk": 8, "speculative_num_draft_tokens": 6}
    scen = scenario(model, "H100-SXM", 2, deployment(model, tp=2, **eagle), clients=256,
                    quality=[QualityResult(subject="Qwen/Qwen3.6-9B", metrics={"accuracy": 0.93}),
                             QualityResult(subject="Qwen/Qwen3.6-4B", metrics={"accuracy": 0.90})])
    scen = _with_draft(scen, "Qwen/Qwen3.6-27B-eagle3")
    deltas = {d.model: d for d in ModelSelection().propose(context(scen))}
    nine = apply_delta(scen, deltas["Qwen/Qwen3.6-9B"])
    server = nine.deployment.groups[0].server
    assert (server.model_path, server.speculative_draft_model_path) == ("Qwen/Qwen3.6-9B", "Qwen/Qwen3.6-9B-eagle3")
    assert nine.workload.speculative.draft_model is None  # it named the 27B's draft
    assert deltas["Qwen/Qwen3.6-9B"].summary == "model Qwen/Qwen3.6-9B (EAGLE3 draft Qwen/Qwen3.6-9B-eagle3)"
    # No draft is known for the 4B: it runs without speculative decoding, and the summary says so.
    moe = apply_delta(scen, deltas["Qwen/Qwen3.6-4B"]).deployment.groups[0].server
    assert moe.speculative_algorithm is None and moe.speculative_draft_model_path is None
    assert moe.speculative_num_steps is None
    assert "no EAGLE3 draft known for it: speculative decoding off" in deltas["Qwen/Qwen3.6-4B"].summary


def test_a_quality_result_for_fp8_is_not_read_as_a_smaller_model(tmp_path: Path) -> None:
    # `<model>:fp8` rates FP8 on the scenario's model; a folder named after 70B parameters once made it look like
    # a 70B model smaller than the 70.6B the config counts, and a round "model /path/llama-70b:fp8" was proposed.
    model = _folder(tmp_path, "llama-70b", hidden_size=8192, intermediate_size=28672, num_attention_heads=64,
                    num_hidden_layers=80)
    scen = scenario(model, "H100-SXM", 8, deployment(model, tp=8), clients=48,
                    quality=[QualityResult(subject=f"{model}:fp8", metrics={"equivalent": 48}, acceptable=True),
                             QualityResult(subject="Qwen/Qwen3.6-27B:fp8", metrics={"equivalent": 40})])
    rule = ModelSelection().applicable(context(scen))
    assert not rule.applicable and "No quality results for smaller models" in rule.reason


def test_a_model_with_its_own_mtp_layer_drafts_with_it() -> None:
    # DeepSeek-V4-Flash ships one next-token-prediction layer (num_nextn_predict_layers) and no EAGLE3 draft:
    # SGLang drafts with the model's own layer (NEXTN, 3 steps, top-1, 4 draft tokens, its MTP default).
    model = "deepseek-ai/DeepSeek-V4-Flash"
    scen = scenario(model, "H200-SXM", 8, deployment(model, tp=8, quantization="fp8"), clients=32)
    assert SPEC.applicable(context(scen)).applicable
    [delta] = SPEC.propose(context(scen))
    assert delta.set_server == {"speculative_algorithm": "NEXTN", "speculative_draft_model_path": model,
                                "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                                "speculative_num_draft_tokens": 4}
    assert delta.summary.startswith("NEXTN (the model's MTP layer)")
    assert not errors(check_scenario(apply_delta(scen, delta)))
    # A switch to a model without MTP layers or a known draft stops speculating (no draft is borrowed).
    on = apply_delta(scen, delta)
    moved = apply_delta(on, msgspec.structs.replace(delta, technique="model_selection", summary="m",
                                                    set_server={}, model="Qwen/Qwen3.6-2B"))
    assert moved.deployment.groups[0].server.speculative_algorithm is None


def test_speculation_added_above_sglangs_48_request_reset_keeps_the_running_slots() -> None:
    # SGLang resets an unset --max-running-requests to 48 under EAGLE-family speculation; two TP8 replicas
    # sent 256 clients hold 128 each, so without more slots 80 of them would queue behind the speculation.
    model = "deepseek-ai/DeepSeek-V4-Flash"
    dep = deployment(model, tp=8, replicas=2, quantization="fp8")
    scen = scenario(model, "H200-SXM", 16, dep, clients=256)
    [delta] = SPEC.propose(context(scen, baseline=measured(220.0)))
    assert delta.set_server["max_running_requests"] == 128 and delta.summary.endswith("max-running-requests 128")
    # At 25 clients the reset is no limit, and a server that sets its own slots keeps them.
    assert "max_running_requests" not in SPEC.propose(context(scenario(model, "H200-SXM", 8, deployment(
        model, tp=8, quantization="fp8"), clients=25)))[0].set_server
    own = scenario(model, "H200-SXM", 16, deployment(model, tp=8, replicas=2, quantization="fp8",
                                                     max_running_requests=96), clients=256)
    assert "max_running_requests" not in SPEC.propose(context(own, baseline=measured(180.0)))[0].set_server


def test_the_kept_running_slots_take_a_user_graph_cap_below_them_along() -> None:
    # The same 128 slots on a server the user started with --cuda-graph-max-bs 32: batches of 33-128 would
    # decode eagerly, so the graph cap rises with the slots (graphs_for, as the scheduling step does).
    model = "deepseek-ai/DeepSeek-V4-Flash"
    dep = deployment(model, tp=8, replicas=2, quantization="fp8", cuda_graph_max_bs=32)
    [delta] = SPEC.propose(context(scenario(model, "H200-SXM", 16, dep, clients=256), baseline=measured(220.0)))
    assert delta.set_server["max_running_requests"] == 128 and delta.set_server["cuda_graph_max_bs"] == 128
    assert delta.summary.endswith("max-running-requests 128, cuda-graph-max-bs 128 (from 32)")
