"""A quantization method that loads a checkpoint stored in it, asked of a 16-bit checkpoint, is refused.

SGLang 0.5.23's loader reads AWQ, GPTQ, ModelOpt and the like from the quantization config file the
checkpoint ships (`model_loader/weight_utils.py` get_quant_config); on a BF16 checkpoint it finds none and
raises "Cannot find the config file for awq" at start. A scenario with `quantization = "awq"` on
Qwen3.6-27B passed the door and its jobs simulated it as BF16. FP8 is quantized at load and passes.
"""

from __future__ import annotations

from service import check_scenario
from service.sglang import errors
from tests.unit.techniques.scenarios import deployment, scenario


def _issues(model: str, method: str):
    scen = scenario(model, "H100-SXM", 2, deployment(model, tp=2, quantization=method), clients=8)
    return [i for i in errors(check_scenario(scen)) if i.field.endswith("server.quantization")]


def test_awq_and_gptq_on_a_bf16_checkpoint_fail_at_start() -> None:
    for method in ("awq", "gptq_marlin", "modelopt_fp8", "compressed-tensors", "w8a8_int8"):
        [issue] = _issues("Qwen/Qwen3.6-27B", method)
        assert issue.field == "deployment.groups[0].server.quantization" and issue.flag == "--quantization"
        assert f"--quantization {method} loads weights stored in {method}" in issue.message
        assert "fails at start" in issue.message and 'quantization = "fp8"' in (issue.hint or "")


def test_fp8_at_load_and_stored_checkpoints_pass() -> None:
    assert _issues("Qwen/Qwen3.6-27B", "fp8") == []
    # A checkpoint stored quantized (config.json's quantization_config) is the loader's to match.
    assert _issues("Qwen/Qwen3-32B-FP8", "fp8") == []


def test_a_folder_checkpoint_stored_quantized_passes(tmp_path) -> None:
    import json

    from service.domain.model import bundled_configs

    config = json.loads(bundled_configs()["Qwen/Qwen3-8B"].read_text())
    # AWQ named in config.json's quantization_config.
    named = tmp_path / "qwen3-8b-awq"
    named.mkdir()
    (named / "config.json").write_text(json.dumps({**config, "quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128}}))
    assert _issues(str(named), "awq") == []
    # A ModelOpt checkpoint keeping its metadata beside config.json only.
    beside = tmp_path / "qwen3-8b-modelopt"
    beside.mkdir()
    (beside / "config.json").write_text(json.dumps(config))
    (beside / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    assert _issues(str(beside), "modelopt_fp8") == []
    # The same folder without that file is a 16-bit checkpoint.
    (beside / "hf_quant_config.json").unlink()
    assert len(_issues(str(beside), "modelopt_fp8")) == 1
