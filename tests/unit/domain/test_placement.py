"""Worker placement: GPU sets, ports, node ranks."""

from service.domain import Deployment, Hardware, ServerConfig, WorkerGroup, gpu_spec, place_workers


def test_four_tp2_replicas_fill_one_node():
    deployment = Deployment(groups=[WorkerGroup(replicas=4, base_port=30001, server=ServerConfig(tp_size=2))])
    placed = place_workers(deployment, Hardware(gpu="H200-SXM"))
    assert [w.gpus for w in placed] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [w.port for w in placed] == [30001, 30002, 30003, 30004]
    assert {w.host for w in placed} == {"127.0.0.1"}


def test_a_replica_wider_than_a_node_spans_whole_nodes_with_ranks():
    server = ServerConfig(tp_size=32, ep_size=32, attention_dp_size=8)
    deployment = Deployment(groups=[WorkerGroup(replicas=4, server=server)])
    placed = place_workers(deployment, Hardware(gpu="H200-SXM", nodes=16))
    assert len(placed) == 16
    first = [w for w in placed if w.replica == 0]
    assert [w.node_rank for w in first] == [0, 1, 2, 3]
    assert [w.host for w in first] == ["node01", "node02", "node03", "node04"]
    assert {w.dist_init_addr for w in first} == {"node01:5000"}
    assert all(w.nnodes == 4 and w.gpus == list(range(8)) for w in placed)
    assert [w.host for w in placed if w.replica == 3][0] == "node13"


def test_data_parallel_without_dp_attention_multiplies_the_world():
    assert ServerConfig(tp_size=2, dp_size=2).world_size == 4
    assert ServerConfig(tp_size=8, dp_size=8, attention_dp_size=8).world_size == 8


def test_gpu_aliases_resolve_to_the_catalogue():
    assert gpu_spec("h200").name == "H200-SXM"
    assert Hardware(gpu="H100-SXM", nodes=2).total_gpus == 16
