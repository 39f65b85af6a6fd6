"""Rendering gives exact argv lists per worker and for the router, spelled for the target version."""

from __future__ import annotations

import pytest

from service.domain import Deployment, Hardware, RouterConfig, ServerConfig, WorkerGroup
from service.sglang import RenderRefused, render_launch, render_scenario

from .conftest import single, with_extra, with_server


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("version", ["0.5.23", "0.5.2"])
def test_casebook_final_renders_four_tp2_workers_and_a_cache_aware_router(coding_final, version):
    launch = render_scenario(coding_final, sglang_version=version)
    assert launch.sglang_version == version
    assert [w.env["CUDA_VISIBLE_DEVICES"] for w in launch.workers] == ["0,1", "2,3", "4,5", "6,7"]
    assert [w.port for w in launch.workers] == [30001, 30002, 30003, 30004]
    for worker in launch.workers:
        argv = worker.argv
        assert argv[:3] == ["python", "-m", "sglang.launch_server"]
        assert _value(argv, "--model-path") == "Qwen/Qwen3.6-27B"
        assert _value(argv, "--port") == str(worker.port)
        assert _value(argv, "--tp-size") == "2"
        assert _value(argv, "--chunked-prefill-size") == "4096"
        assert _value(argv, "--quantization") == "fp8" and _value(argv, "--kv-cache-dtype") == "fp8_e5m2"
        assert _value(argv, "--speculative-algorithm") == "EAGLE3"
        assert _value(argv, "--mem-fraction-static") == "0.9"
        assert "--enable-metrics" in argv
    router = launch.router.argv
    assert router[:3] == ["python", "-m", "sglang_router.launch_router"]
    assert _value(router, "--policy") == "cache_aware"
    urls = router[router.index("--worker-urls") + 1:router.index("--policy")]
    assert urls == [f"http://127.0.0.1:{port}" for port in range(30001, 30005)]


def test_enable_ep_moe_fails_on_0_5_23_naming_the_replacement_and_passes_on_0_5_2(coding_final):
    scenario = with_extra(coding_final, enable_ep_moe=True)
    with pytest.raises(RenderRefused, match=r"--enable-ep-moe was removed after 0\.5\.2; use --ep-size equal to "
                                            r"--tp-size \(an all-to-all also needs --moe-a2a-backend\)"):
        render_scenario(scenario, sglang_version="0.5.23")
    launch = render_scenario(scenario, sglang_version="0.5.2")
    assert "--enable-ep-moe" in launch.workers[0].argv
    assert any("deprecated" in issue.message for issue in launch.warnings)


def _case5_round1() -> tuple[Deployment, Hardware]:
    server = ServerConfig(tp_size=32, ep_size=32, attention_dp_size=8, quantization="fp8",
                          kv_cache_dtype="fp8_e5m2", chunked_prefill_size=8192, mem_fraction_static=0.88)
    deployment = Deployment(groups=[WorkerGroup(name="moe", replicas=4, base_port=30000, server=server)],
                            router=RouterConfig(policy="round_robin", host="0.0.0.0", port=8000))
    return deployment, Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=16)


def test_multi_node_ep_and_dp_attention_render_ranks_and_rendezvous():
    deployment, hardware = _case5_round1()
    launch = render_launch(deployment, hardware, model="deepseek-ai/DeepSeek-V4-Flash", sglang_version="0.5.23")
    first = [w for w in launch.workers if w.replica == 0]
    assert [w.node_rank for w in first] == [0, 1, 2, 3]
    assert [w.host for w in first] == ["node01", "node02", "node03", "node04"]
    for worker in first:
        argv = worker.argv
        assert _value(argv, "--nnodes") == "4" and _value(argv, "--node-rank") == str(worker.node_rank)
        assert _value(argv, "--dist-init-addr") == "node01:5000"
        assert _value(argv, "--ep-size") == "32" and _value(argv, "--attn-dp-size") == "8"
        assert worker.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
        assert "--enable-dp-attention" not in argv
    assert len(launch.workers) == 16
    router = launch.router.argv
    assert router[router.index("--worker-urls") + 1:router.index("--policy")] == [
        "http://node01:30000", "http://node05:30001", "http://node09:30002", "http://node13:30003"]


def test_dp_attention_uses_the_old_spelling_up_to_0_5_20():
    deployment, hardware = _case5_round1()
    argv = render_launch(deployment, hardware, model="m", sglang_version="0.5.20").workers[0].argv
    assert "--enable-dp-attention" in argv and _value(argv, "--dp-size") == "8"
    assert "--attn-dp-size" not in argv


@pytest.mark.parametrize(("version", "flag"), [("0.5.2", "--cuda-graph-max-bs"), ("0.5.9", "--cuda-graph-max-bs"),
                                               ("0.5.15", "--cuda-graph-max-bs-decode"),
                                               ("0.5.23", "--cuda-graph-max-bs-decode")])
def test_cuda_graph_batch_cap_is_spelled_for_the_version(coding_final, version, flag):
    argv = render_scenario(with_server(coding_final, cuda_graph_max_bs=64), sglang_version=version).workers[0].argv
    assert _value(argv, flag) == "64"


def test_pd_render_gives_the_router_prefill_and_decode_arguments():
    groups = [WorkerGroup(name="prefill", role="prefill", replicas=2, base_port=30001, bootstrap_port=8998,
                          server=ServerConfig(tp_size=4)),
              WorkerGroup(name="decode", role="decode", replicas=1, base_port=30010, server=ServerConfig(tp_size=8))]
    router = RouterConfig(policy="cache_aware", prefill_policy="cache_aware", decode_policy="round_robin", port=8000)
    launch = render_launch(Deployment(groups=groups, router=router), Hardware(gpu="H200-SXM", nodes=2),
                           model="m", sglang_version="0.5.23")
    prefill, second, decode = launch.workers
    assert _value(prefill.argv, "--disaggregation-mode") == "prefill"
    assert _value(prefill.argv, "--disaggregation-bootstrap-port") == "8998"
    assert _value(second.argv, "--disaggregation-bootstrap-port") == "8999"
    assert _value(decode.argv, "--disaggregation-mode") == "decode"
    assert "--disaggregation-bootstrap-port" not in decode.argv
    argv = launch.router.argv
    assert "--pd-disaggregation" in argv and "--worker-urls" not in argv
    start = argv.index("--pd-disaggregation") + 1
    assert argv[start:start + 8] == ["--prefill", "http://node01:30001", "8998", "--prefill", "http://node01:30002",
                                     "8999", "--decode", "http://node02:30010"]
    assert _value(argv, "--prefill-policy") == "cache_aware" and _value(argv, "--decode-policy") == "round_robin"


def test_defaults_and_false_switches_are_omitted_and_model_path_overrides_the_scenario():
    deployment, hardware = single(ServerConfig(tp_size=1, enable_metrics=False, schedule_conservativeness=1.0,
                                               model_path="/models/local"))
    argv = render_launch(deployment, hardware, model="Qwen/Qwen3.6-27B", sglang_version="0.5.23").workers[0].argv
    assert argv == ["python", "-m", "sglang.launch_server", "--model-path", "/models/local", "--host", "127.0.0.1",
                    "--port", "30001"]


def test_router_thresholds_are_rendered_when_set():
    router = RouterConfig(policy="cache_aware", cache_threshold=0.5, balance_abs_threshold=32, prometheus_port=29000)
    deployment, hardware = single(ServerConfig(tp_size=2), replicas=2, router=router)
    argv = render_launch(deployment, hardware, model="m", sglang_version="0.5.23").router.argv
    assert _value(argv, "--cache-threshold") == "0.5" and _value(argv, "--balance-abs-threshold") == "32"
    assert _value(argv, "--prometheus-port") == "29000"
