"""The casebook's capacity calculation at the door: a server whose weights leave no KV cache never starts.

SGLang loads the weights into the static pool (mem-fraction-static x HBM) and sizes the KV cache from what
is left; with nothing left it refuses to start, on every attempt. Such a scenario is refused before any
round, naming the field and a deployment that would fit, instead of failing four launches.
"""

from __future__ import annotations

import json
from pathlib import Path

from service import SLO, check_scenario, resolve_model
from service.sglang import errors
from tests.unit.techniques.scenarios import deployment, scenario

LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
             "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
             "vocab_size": 128256, "max_position_embeddings": 131072, "head_dim": 128}


def _llama_70b(tmp_path: Path, **config: object) -> str:
    folder = tmp_path / "llama-70b"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**LLAMA_70B, **config}))
    return str(folder)


def test_weights_beyond_the_gpu_are_refused_with_a_tp_that_fits(tmp_path: Path) -> None:
    model = _llama_70b(tmp_path)
    # About 70B parameters in BF16 on one of four H100s: 131 GiB of weights against 67 GiB of static pool.
    [issue] = errors(check_scenario(scenario(model, "H100-SXM", 4, deployment(model, tp=1), clients=8)))
    assert issue.field == "deployment.groups[0].server.tp-size"
    assert "cannot start" in issue.message and "GiB of weights per GPU" in issue.message
    # TP2 would hold 66 GiB of each 80 GB GPU, past the 80% the hint allows; TP4 holds 33 GiB.
    assert issue.hint.startswith("use tp-size 4 (33 GiB")
    assert not errors(check_scenario(scenario(model, "H100-SXM", 4, deployment(model, tp=4), clients=8)))


def test_fp8_is_offered_where_the_gpu_has_fp8_and_nothing_where_nothing_fits(tmp_path: Path) -> None:
    # Casebook case 2's model list: 27B BF16 is 54 GB, more than one 48 GB L40S; in FP8 it is 25 GiB.
    model = "Qwen/Qwen3.6-27B"
    [issue] = errors(check_scenario(scenario(model, "L40S", 1, deployment(model), clients=8,
                                             slo=SLO(ttft_p95_ms=2000))))
    assert issue.hint == 'use quantization = "fp8" (25 GiB per GPU), after a quality check'
    # A100s have no FP8 tensor cores, and one GPU cannot be split further.
    big = _llama_70b(tmp_path)
    [alone] = errors(check_scenario(scenario(big, "A100-80GB", 1, deployment(big), clients=8)))
    assert "does not fit this hardware" in alone.hint


def test_a_checkpoint_stored_quantized_is_sized_in_its_own_bits(tmp_path: Path) -> None:
    # An AWQ 4-bit 70B checkpoint is about 33 GiB and loads on one H100 without --quantization.
    awq = _llama_70b(tmp_path, quantization_config={"quant_method": "awq", "bits": 4})
    assert resolve_model(awq).weight_bytes("bf16") == resolve_model(awq).params_total / 2
    assert not errors(check_scenario(scenario(awq, "H100-SXM", 1, deployment(awq), clients=8)))
    # An FP8 checkpoint of it is 66 GiB: it loads on one H100, not on one 48 GB L40S.
    fp8 = _llama_70b(tmp_path, quantization_config={"quant_method": "fp8"})
    assert not errors(check_scenario(scenario(fp8, "H100-SXM", 1, deployment(fp8), clients=8)))
    [issue] = errors(check_scenario(scenario(fp8, "L40S", 1, deployment(fp8), clients=8)))
    assert "65.7 GiB of weights per GPU" in issue.message
    # A method whose bits are not read here is not refused on a guess.
    odd = _llama_70b(tmp_path, quantization_config={"quant_method": "bitsandbytes"})
    assert not errors(check_scenario(scenario(odd, "H100-SXM", 1, deployment(odd), clients=8)))


def test_a_chunk_whose_activation_reserve_leaves_the_weights_no_room_is_named_not_the_weights() -> None:
    # SGLang's default mem-fraction-static sets aside 1.5 MB per chunk token: 32768 tokens take all of a 48 GB
    # L40S, though a 4B model's 7.5 GiB of weights fit with the default 4096-token chunk.
    model = "Qwen/Qwen3.6-4B"
    long_chunk = scenario(model, "L40S", 1, deployment(model, chunked_prefill_size=32768), clients=8)
    [issue] = errors(check_scenario(long_chunk))
    assert issue.field == "deployment.groups[0].server.chunked-prefill-size"
    assert "1.5 MB per token of the 32768-token chunk" in issue.message
    assert issue.hint == "set mem-fraction-static explicitly, or use a chunked-prefill-size of 16384 or less"
    assert "fp8" not in issue.hint
    assert not errors(check_scenario(scenario(model, "L40S", 1, deployment(model, chunked_prefill_size=16384),
                                              clients=8)))
    assert not errors(check_scenario(scenario(model, "L40S", 1, deployment(
        model, chunked_prefill_size=32768, mem_fraction_static=0.85), clients=8)))
