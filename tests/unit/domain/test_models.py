"""Shipped casebook models match the casebook's stated numbers."""

import pytest

from service.domain import AttentionKind, resolve_model
from service.domain.model import shipped_models


def test_qwen36_27b_matches_the_casebook_capacity_section():
    model = resolve_model("Qwen/Qwen3.6-27B")
    assert (model.num_layers, model.num_kv_heads, model.head_dim) == (48, 8, 128)
    assert model.params_total == 27e9
    assert model.kv_bytes_per_token("bf16") == 196_608  # "≈ 192 KB"
    assert model.kv_bytes_per_token("fp8_e5m2") == 98_304  # "96 KB"
    assert model.weight_bytes("bf16") == pytest.approx(54e9)  # "54GB (BF16) to 27GB (FP8)"
    assert model.weight_bytes("fp8") == pytest.approx(27e9)


@pytest.mark.parametrize(
    ("name", "total", "active", "moe"),
    [
        ("Qwen/Qwen3.6-9B", 9e9, 9e9, False),
        ("Qwen/Qwen3.6-4B", 4e9, 4e9, False),
        ("Qwen/Qwen3.6-2B", 2e9, 2e9, False),
        ("Qwen/Qwen3.6-35B-A3B", 35e9, 3e9, True),
        ("zai-org/GLM-4.5-Air", 106e9, 12e9, True),
        ("zai-org/GLM-5.2", 744e9, 40e9, True),
        ("deepseek-ai/DeepSeek-V4-Flash", 284e9, 13e9, True),
        ("Qwen/Qwen3.5-397B-A17B", 397e9, 17e9, True),
    ],
)
def test_casebook_models_carry_stated_parameters(name, total, active, moe):
    model = resolve_model(name)
    assert (model.params_total, model.params_active, model.is_moe) == (total, active, moe)
    assert model.weight_bytes("fp8") == pytest.approx(total)  # FP8 weights: one byte per parameter
    assert "casebook" in model.provenance.lower()


def test_every_shipped_model_states_its_provenance():
    for name, folder in shipped_models().items():
        assert (folder / "config.json").exists(), name
        assert len(resolve_model(name).provenance) > 40, name


def test_mla_stores_one_latent_per_token_not_k_and_v():
    model = resolve_model("deepseek-ai/DeepSeek-V4-Flash")
    assert model.attention is AttentionKind.MLA
    assert model.kv_bytes_per_token("fp8") == model.num_layers * (model.kv_lora_rank + model.qk_rope_head_dim)


def test_hybrid_linear_attention_keeps_kv_only_on_full_attention_layers():
    model = resolve_model("Qwen/Qwen3.5-397B-A17B")
    assert model.attention is AttentionKind.HYBRID_LINEAR
    assert 0 < model.kv_layers < model.num_layers
    assert model.linear_state_bytes_per_request > 0


def test_local_config_folder_resolves(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,'
        ' "intermediate_size": 2048, "vocab_size": 1000}'
    )
    model = resolve_model(str(tmp_path))
    assert model.kv_bytes_per_token("bf16") == 2 * 4 * 2 * 128 * 2
    assert model.provenance == "estimated from config.json"


def test_unknown_model_names_the_shipped_ones():
    with pytest.raises(KeyError, match="Qwen/Qwen3.6-27B"):
        resolve_model("no/such-model")


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        # Public parameter counts: Llama 3.1 model cards; DeepSeek-V3 671B total (37B active) without its MTP
        # module, whose 3 leading dense layers the estimate must not count as 257-expert layers.
        ("meta-llama/Meta-Llama-3.1-70B", 70.6e9, 70.6e9),
        ("meta-llama/Meta-Llama-3.1-8B", 8.0e9, 8.0e9),
        ("deepseek-ai/DeepSeek-V3", 671e9, 37e9),
        ("mistralai/Mixtral-8x7B-v0.1", 46.7e9, 12.9e9),
        ("Qwen/Qwen3-32B", 32.8e9, 32.8e9),
    ],
)
def test_a_model_aiconfigurator_bundles_resolves_by_its_id(name, total, active):
    model = resolve_model(name)
    assert model.params_total == pytest.approx(total, rel=0.03)
    assert model.params_active == pytest.approx(active, rel=0.05)
    assert "bundled with aiconfigurator-core" in model.provenance


def test_bundled_configs_the_estimate_would_mis_size_are_left_out():
    # Llama 4 interleaves dense and MoE layers and Nemotron-H mixes in Mamba layers: estimated as uniform
    # layers they would come out at 778B (Maverick is 400B) and 102B (Nemotron-3-Nano is 30B).
    for name in ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"):
        with pytest.raises(KeyError, match="aiconfigurator-core bundles"):
            resolve_model(name)


def test_a_misspelt_bundled_model_gets_the_nearest_id():
    from service.scenario_check import check_model

    issues = check_model("Qwen/Qwen3-32b")
    assert len(issues) == 1 and issues[0].field == "model"
    assert "did you mean 'Qwen/Qwen3-32B'?" in (issues[0].hint or "")


def test_an_instruct_or_renamed_release_of_a_known_model_is_named_with_the_base_it_would_be_sized_by():
    from service.scenario_check import check_model

    # Meta renamed its repositories; an instruct or dated release usually keeps the base's layers, but the
    # door does not size it by the base silently: Qwen3-30B-A3B-Instruct-2507 reads 262,144 tokens of context.
    cases = {
        "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama/Meta-Llama-3.1-8B", "131,072"),
        "meta-llama/Llama-3.1-70B": ("meta-llama/Meta-Llama-3.1-70B", "131,072"),
        "mistralai/Mixtral-8x7B-Instruct-v0.1": ("mistralai/Mixtral-8x7B-v0.1", "32,768"),
        "Qwen/Qwen3-30B-A3B-Instruct-2507": ("Qwen/Qwen3-30B-A3B", "40,960"),
        "Qwen/Qwen3-235B-A22B-Thinking-2507-FP8": ("Qwen/Qwen3-235B-A22B-FP8", "40,960"),
        "deepseek-ai/DeepSeek-V3-0324": ("deepseek-ai/DeepSeek-V3", "163,840"),
        # A release of a known release: matched without the release words of either.
        "moonshotai/Kimi-K2-Instruct-0905": ("moonshotai/Kimi-K2-Instruct", "131,072"),
    }
    for ref, (base, window) in cases.items():
        with pytest.raises(KeyError):
            resolve_model(ref)
        [issue] = check_model(ref)
        assert issue.field == "model" and issue.message.startswith(f"unknown model {ref!r}")
        assert (f"{ref!r} looks like {base!r} under another name, or a post-trained release of it: where it "
                f"keeps that model's architecture and its context window of {window} tokens, name {base!r}."
                in (issue.hint or ""))
    # Another family's instruct release is not steered to a known model's by its "-Instruct".
    [other] = check_model("Qwen/Qwen2.5-7B-Instruct")
    assert "looks like" not in (other.hint or "") and "Coder-480B" not in (other.hint or "")
    assert check_model("meta-llama/Meta-Llama-3.1-8B") == []


def test_sliding_window_layers_take_sglang_s_swa_share_of_a_token_s_kv_bytes():
    # gpt-oss alternates 128-token sliding-window layers with full ones; SGLang's hybrid SWA pool sizes a token
    # as the full layers plus 0.8 (--swa-full-tokens-ratio) of the sliding ones: (12 + 0.8 x 12) layers of
    # 8 KV heads x 64 dims x K and V x 2 bytes for gpt-oss-20b, 11% more tokens than all 24 layers would hold.
    from service.domain.model import model_from_config

    oss = resolve_model("openai/gpt-oss-20b")
    assert (oss.sliding_layers, oss.num_layers) == (12, 24)
    assert oss.kv_bytes_per_token() == int(2 * (12 + 0.8 * 12) * 8 * 64 * 2) == 44236
    assert resolve_model("openai/gpt-oss-120b").sliding_layers == 18
    # Models without sliding layers, and those whose SGLang overrides keep every layer in the full pool
    # (Gemma 2 and 3: `disable_hybrid_swa_memory`), count every layer whole.
    assert resolve_model("Qwen/Qwen3-32B").sliding_layers == 0
    gemma = {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "num_hidden_layers": 4,
             "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 1024, "intermediate_size": 10240,
             "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]}
    assert model_from_config(gemma, "gemma").sliding_layers == 0
    assert model_from_config({**gemma, "model_type": "gpt_oss"}, "swa").sliding_layers == 3
