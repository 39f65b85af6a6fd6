"""KV memory, capacity and weight figures from the casebook's capacity calculations (cases 1 and 2)."""

import pytest

from service.calc import (
    GB,
    KB,
    kv_bytes_per_token,
    kv_capacity,
    kv_memory_gb,
    mla_kv_bytes_per_token,
    model_kv_bytes_per_token,
    weight_memory_gb,
)
from service.domain.model import model_from_config

# Qwen3.6-27B attention as the casebook states it: 48 layers, 8 KV heads, head dim 128.
QWEN_27B = {"num_layers": 48, "num_kv_heads": 8, "head_dim": 128}


def test_kv_per_token_is_192_kb_in_bf16_and_96_kb_in_fp8():
    bf16 = kv_bytes_per_token(48, 8, 128, "bf16")
    fp8 = kv_bytes_per_token(48, 8, 128, "fp8_e5m2")
    assert bf16 == 196_608
    assert bf16 / KB == 192
    assert fp8 / KB == 96


def test_kv_per_token_from_a_model_config_matches_the_explicit_shape():
    config = {"hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
              "head_dim": 128, "intermediate_size": 17408, "vocab_size": 151936}
    model = model_from_config(config, "Qwen/Qwen3.6-27B", {"params_total": 27e9, "params_active": 27e9})
    assert model_kv_bytes_per_token(model, "bf16") == 192 * KB
    assert model_kv_bytes_per_token(model, "fp8_e5m2") == 96 * KB


def test_mla_caches_one_latent_and_rope_key_per_layer():
    # DeepSeek-V3 shape: 61 layers, kv_lora_rank 512, rope head dim 64 -> 61 x 576 x 2 bytes.
    assert mla_kv_bytes_per_token(61, 512, 64, "bf16") == 70_272
    config = {"hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
              "kv_lora_rank": 512, "qk_rope_head_dim": 64, "head_dim": 128, "intermediate_size": 18432,
              "n_routed_experts": 256, "moe_intermediate_size": 2048, "num_experts_per_tok": 8}
    model = model_from_config(config, "deepseek-like")
    assert model_kv_bytes_per_token(model, "fp8_e5m2") == 61 * 576


def test_25_requests_hold_14_4_gb_at_3000_tokens_and_134_gb_at_28000():
    per_token = kv_bytes_per_token(**QWEN_27B)
    assert kv_memory_gb(per_token, 3_000, 25) == pytest.approx(14.4)
    assert kv_memory_gb(per_token, 28_000, 25) == pytest.approx(134.4)
    assert round(kv_memory_gb(per_token, 28_000, 25)) == 134
    fp8 = kv_bytes_per_token(**QWEN_27B, kv_dtype="fp8_e5m2")
    assert kv_memory_gb(fp8, 3_000, 25) == pytest.approx(7.2)
    assert round(kv_memory_gb(fp8, 28_000, 25)) == 67


def test_weights_are_54_gb_in_bf16_and_27_gb_in_fp8():
    assert weight_memory_gb(27e9, "bf16") == pytest.approx(54)
    assert weight_memory_gb(27e9, "fp8") == pytest.approx(27)


def test_4xh100_caches_134_documents_of_20000_tokens():
    cap = kv_capacity(4 * 80, 27, 35, kv_bytes_per_token(**QWEN_27B, kv_dtype="fp8_e5m2"), document_tokens=20_000)
    assert cap.kv_available_gb == 258
    assert cap.document_gb == pytest.approx(1.92)
    assert cap.documents == 134
    assert cap.kv_tokens == 258 * GB // (96 * KB)
    assert cap.host_documents == 0 and cap.total_documents == 134


def test_hicache_ratio_2_layers_268_host_documents_on_top_for_402():
    cap = kv_capacity(320, 27, 35, 96 * KB, document_tokens=20_000, hicache_ratio=2)
    assert cap.host_pool_gb == 516
    assert (cap.documents, cap.host_documents, cap.total_documents) == (134, 268, 402)
    assert cap.total_tokens == 3 * cap.kv_tokens


def test_hicache_size_overrides_the_ratio():
    cap = kv_capacity(320, 27, 35, 96 * KB, document_tokens=20_000, hicache_ratio=2, hicache_size_gb=200)
    assert cap.host_pool_gb == 200
    assert cap.host_documents == 104  # 200 / 1.92 = 104.2


def test_hicache_size_is_per_gpu_rank_as_sglang_reads_it():
    # `pool_host/base.py` sizes the host pool per rank: 4 GPUs with --hicache-size 50 pin 200 GB.
    cap = kv_capacity(320, 27, 35, 96 * KB, document_tokens=20_000, hicache_size_gb=50, ranks=4)
    assert cap.host_pool_gb == 200 and cap.host_documents == 104


def test_weights_and_headroom_larger_than_memory_are_rejected():
    with pytest.raises(ValueError, match="no KV cache room"):
        kv_capacity(80, 54, 35, 192 * KB)
