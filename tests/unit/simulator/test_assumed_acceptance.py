"""A speculative round simulated at the default draft acceptance says so, and so does the report's headline.

EAGLE3's simulated speed-up follows the per-token acceptance the workload states. A reasoning workload on a
TP4 27B with no `speculative.draft_acceptance` kept EAGLE3 at +166% output tok/s on the default 0.75; the
figure now carries the assumption in its provenance note, and a final deployment resting on it says so first.
"""

from __future__ import annotations

import msgspec

from service.domain import SpeculativeBehaviour
from service.engine.summary import FinalParts, _assumed_acceptance

from .conftest import load, run

EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4, "speculative_draft_model_path": "Qwen/Qwen3.6-27B-eagle3"}


def _case1(acceptance: float | None):
    base = load("coding-assistant-round0")
    group = base.deployment.groups[0]
    server = msgspec.structs.replace(group.server, **EAGLE3)
    deployment = msgspec.structs.replace(base.deployment, groups=[msgspec.structs.replace(group, server=server)])
    workload = msgspec.structs.replace(base.workload, speculative=SpeculativeBehaviour(draft_acceptance=acceptance))
    bench = msgspec.structs.replace(base.bench, num_prompts=60)
    return msgspec.structs.replace(base, deployment=deployment, workload=workload, bench=bench)


def test_the_default_acceptance_is_named_where_it_was_used() -> None:
    assumed = run(_case1(None))
    assert "assumed per-token draft acceptance of 0.75: workload.speculative.draft_acceptance is not given" \
        in assumed.provenance.note
    stated = run(_case1(0.6))
    assert "draft acceptance" not in stated.provenance.note
    # The stated figure is the one simulated: a lower acceptance emits fewer tokens per verify step.
    assert stated.server.spec_accept_length < assumed.server.spec_accept_length


def test_a_final_deployment_on_the_assumption_says_so_and_one_on_a_stated_figure_does_not() -> None:
    for acceptance, expected in ((None, True), (0.6, False)):
        scenario = _case1(acceptance)
        line = _assumed_acceptance(FinalParts(scenario=scenario, results=[run(scenario)], launch_commands=[],
                                              router_command=None, artifacts={}, launch_refused=[]))
        assert bool(line) is expected
        if expected:
            assert line.startswith("The final deployment's speculative decoding was simulated at an assumed "
                                   "draft acceptance of 0.75 per token")
