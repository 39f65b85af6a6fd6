"""Calculators over HTTP reproduce the casebook's numbers and name the field at fault."""

from __future__ import annotations

from litestar.testing import TestClient

from tests.api.fakes import auth


def test_casebook_figures(client: TestClient, tokens: dict[str, str]) -> None:
    headers = auth(tokens["read"])
    per_token = client.post("/v1/calculators/kv-per-token", json={"model": "Qwen/Qwen3.6-27B"}, headers=headers)
    assert per_token.status_code == 200 and per_token.json()["kv_bytes_per_token"] > 0
    threshold = client.post("/v1/calculators/threshold-batch", json={"gpu": "H200-SXM"}, headers=headers).json()
    assert threshold["threshold_batch_size"] == 206  # casebook: 989 TFLOP/s / 4.8 TB/s
    needed = client.post("/v1/calculators/required-throughput", headers=headers, json={
        "requests": 2_400_000, "input_tokens": 1200, "output_tokens": 150, "deadline_s": 43_200}).json()
    assert round(needed["output_tokens_per_s"]) == 8333  # casebook case 3
    capacity = client.post("/v1/calculators/kv-capacity", headers=headers, json={
        "gpu": "H100-SXM", "gpus": 4, "weights_gb": 27, "headroom_gb": 35, "kv_bytes_per_token": 96 * 1024,
        "document_tokens": 20_000}).json()
    assert capacity["kv_available_gb"] == 258 and capacity["documents"] == 134  # casebook case 2


def test_calculator_errors_name_the_field(client: TestClient, tokens: dict[str, str]) -> None:
    headers = auth(tokens["read"])
    unknown_gpu = client.post("/v1/calculators/threshold-batch", json={"gpu": "Voodoo 2"}, headers=headers)
    assert unknown_gpu.status_code == 422 and unknown_gpu.json()["field"] == "gpu"
    no_shape = client.post("/v1/calculators/kv-per-token", json={}, headers=headers)
    assert no_shape.status_code == 422 and no_shape.json()["hint"]
