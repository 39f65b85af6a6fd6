"""A tp-size the attention heads do not split over is refused at the door, naming the sizes that do.

SGLang's QKV projection divides the attention heads over the attention TP ranks and asserts the split is
even; KV heads fewer than the ranks are replicated over a whole number of them. A server that breaks
either fails at load on every attempt, so the scenario (or a technique's candidate) is refused before a
round is spent on it.
"""

from __future__ import annotations

import msgspec

from service import check_candidate, check_scenario
from service.sglang import errors
from tests.unit.techniques.scenarios import deployment, scenario

MODEL = "Qwen/Qwen3.6-27B"  # 64 attention heads, 8 KV heads


def test_a_tp_size_that_does_not_divide_the_heads_is_refused_with_the_sizes_that_do() -> None:
    [issue] = errors(check_scenario(scenario(MODEL, "H100-SXM", 6, deployment(MODEL, tp=3), clients=8)))
    assert issue.field == "deployment.groups[0].server.tp-size" and issue.flag == "--tp-size"
    assert "cannot load Qwen/Qwen3.6-27B at tp-size 3" in issue.message
    assert "64 attention heads do not divide over 3 attention TP ranks" in issue.message
    assert issue.hint == "use tp-size 1, 2 or 4"
    for tp in (1, 2, 4):
        assert not errors(check_scenario(scenario(MODEL, "H100-SXM", 6, deployment(MODEL, tp=tp), clients=8)))


def test_kv_heads_must_divide_or_replicate_evenly() -> None:
    # 64 heads split over 16 ranks, 4 each; the 8 KV heads replicate twice each: that loads. Over 32 ranks
    # a Qwen3.6-35B-A3B's 16 heads do not split at all.
    two_nodes = scenario(MODEL, "H100-SXM", 8, deployment(MODEL, tp=16), clients=8)
    two_nodes = msgspec.structs.replace(two_nodes, hardware=msgspec.structs.replace(two_nodes.hardware, nodes=2))
    assert not [i for i in errors(check_scenario(two_nodes)) if "attention" in i.message]
    moe = "Qwen/Qwen3.6-35B-A3B"
    wide = scenario(moe, "H100-SXM", 8, deployment(moe, tp=32), clients=8)
    wide = msgspec.structs.replace(wide, hardware=msgspec.structs.replace(wide.hardware, nodes=4))
    issues = [i for i in check_candidate(wide) if "attention heads" in i.message]
    assert issues and "16 attention heads do not divide over 32" in issues[0].message


def test_nextn_on_a_model_without_an_mtp_layer_is_refused_with_its_eagle3_draft() -> None:
    # NEXTN drafts with the checkpoint's own multi-token-prediction layer; Qwen3.6-9B has none, and ships
    # saying which EAGLE3 draft it has. Qwen3.6-35B-A3B carries one (mtp_num_hidden_layers 1) and loads.
    dense = "Qwen/Qwen3.6-9B"
    scen = scenario(dense, "H100-SXM", 1, deployment(dense, speculative_algorithm="NEXTN"), clients=8)
    [issue] = [i for i in errors(check_scenario(scen)) if i.field.endswith("speculative-algorithm")]
    assert "Qwen/Qwen3.6-9B's config.json declares none" in issue.message and "fail at start" in issue.message
    assert issue.hint == "use speculative-algorithm EAGLE3 with speculative-draft-model-path Qwen/Qwen3.6-9B-eagle3"
    moe = "Qwen/Qwen3.6-35B-A3B"
    own = scenario(moe, "H200-SXM", 1, deployment(moe, speculative_algorithm="NEXTN"), clients=8)
    assert not [i for i in errors(check_scenario(own)) if i.field.endswith("speculative-algorithm")]


def test_nextn_whose_draft_is_the_model_itself_is_still_refused_without_an_mtp_layer() -> None:
    # The speculative technique names the model itself as NEXTN's draft (what SGLang sets on its own): that is
    # the same missing MTP layer, so the candidate is refused as the bare flag is.
    dense = "Qwen/Qwen3.6-4B"
    dep = deployment(dense, speculative_algorithm="NEXTN", speculative_draft_model_path=dense)
    issues = [i for i in check_candidate(scenario(dense, "H100-SXM", 1, dep, clients=8))
              if i.field.endswith("speculative-algorithm")]
    assert issues and "declares none" in issues[0].message


def test_the_hint_lists_only_tp_sizes_the_replicas_fit_in() -> None:
    issues = errors(check_scenario(scenario(MODEL, "H100-SXM", 6, deployment(MODEL, tp=3, replicas=2), clients=8)))
    [issue] = [i for i in issues if i.field.endswith("server.tp-size")]
    assert issue.hint == "use tp-size 1 or 2"  # tp-size 4 x 2 replicas would need 8 GPUs


def test_the_sizes_offered_also_hold_the_weights() -> None:
    # Qwen3.6-27B in BF16 (50 GiB) on 48 GB L40S at tp-size 3: tp-size 1 splits the heads but cannot start.
    [issue] = errors(check_scenario(scenario(MODEL, "L40S", 6, deployment(MODEL, tp=3), clients=8)))
    assert issue.hint == "use tp-size 2 or 4"
    # On three 24 GB L4s at tp-size 3 nothing both splits the heads and holds the weights.
    [issue] = errors(check_scenario(scenario(MODEL, "L4", 3, deployment(MODEL, tp=3), clients=8)))
    assert issue.hint.startswith("no tp-size up to 3 both splits the heads and holds the weights")
