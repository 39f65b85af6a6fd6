"""The example plugin passes sglang-tuner's shipped contract suites and registers through the hooks."""

import msgspec
import pytest
from service.testing import PlaybookContract, TechniqueContract, casebook_context, make_host

import sglang_tuner_example
from sglang_tuner_example.technique import CudaGraphBatchTechnique, default_decode_graph_max_bs


def _at_peak(concurrency):
    ctx = casebook_context()  # the casebook's case-1 final deployment: four TP2 workers on 8xH200
    workload = msgspec.structs.replace(ctx.scenario.workload, peak_concurrency=concurrency)
    return msgspec.structs.replace(ctx, scenario=msgspec.structs.replace(ctx.scenario, workload=workload))


class TestCudaGraphBatchContract(TechniqueContract):
    @pytest.fixture
    def technique(self):
        return CudaGraphBatchTechnique()

    @pytest.fixture(params=[25, 1400], ids=["below-capture", "above-capture"])
    def context(self, request):
        return _at_peak(request.param)


class TestHighConcurrencyDecodePlaybook(PlaybookContract):
    @pytest.fixture
    def host(self):
        # The playbook names this plugin's technique beside a built-in one.
        return make_host(("example", sglang_tuner_example), builtins=True)

    @pytest.fixture
    def playbook(self, host):
        return host.get("playbook", "high-concurrency-decode")


def test_registers_through_the_plugin_host(sglang_tuner_host):
    host = sglang_tuner_host(("example", sglang_tuner_example))
    listed = [(c.kind, c.name, c.plugin) for c in host.listing()]
    assert listed == [("playbook", "high-concurrency-decode", "example"), ("technique", "cuda_graph_batch", "example")]


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
