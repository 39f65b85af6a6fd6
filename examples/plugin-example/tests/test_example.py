"""The example plugin passes the technique contract suite and registers through the hooks."""

import msgspec
import pytest

import sglang_tuner_example
from sglang_tuner_example.technique import CudaGraphBatchTechnique, default_decode_graph_max_bs
from service.testing import TechniqueContract, casebook_context


def _at_peak(concurrency):
    ctx = casebook_context()
    workload = msgspec.structs.replace(ctx.scenario.workload, peak_concurrency=concurrency)
    return msgspec.structs.replace(ctx, scenario=msgspec.structs.replace(ctx.scenario, workload=workload))


class TestCudaGraphBatchContract(TechniqueContract):
    @pytest.fixture
    def technique(self):
        return CudaGraphBatchTechnique()

    @pytest.fixture(params=[25, 1400], ids=["below-capture", "above-capture"])
    def context(self, request):
        return _at_peak(request.param)


def test_registers_through_the_plugin_host(sglang_tuner_host):
    host = sglang_tuner_host(("example", sglang_tuner_example))
    assert [c.name for c in host.listing()] == ["cuda_graph_batch"]
    assert host.listing()[0].plugin == "example"


def test_not_applicable_when_the_peak_fits_the_default_capture():
    ctx = casebook_context()  # 25 concurrent requests over 4 workers
    verdict = CudaGraphBatchTechnique().applicable(ctx)
    assert not verdict.applicable
    assert "within the 256 captured" in verdict.reason


def test_proposes_a_capture_size_above_the_peak():
    ctx = _at_peak(1400)
    technique = CudaGraphBatchTechnique()
    assert technique.applicable(ctx).applicable
    (delta,) = technique.propose(ctx)
    assert delta.set_server == {"cuda-graph-max-bs": 440}  # 350 per worker x 1.25, rounded up to 8


def test_default_capture_follows_sglang_memory_rules():
    assert default_decode_graph_max_bs(141, 2) == 256
    assert default_decode_graph_max_bs(141, 8) == 512
    assert default_decode_graph_max_bs(24, 1) == 48
