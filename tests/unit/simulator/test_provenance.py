"""A simulated round says which step model answered, in that model's own words."""

from __future__ import annotations

import msgspec

from service.domain import Deployment, RouterConfig, WorkerGroup, resolve_model
from service.simulator import simulate_round
from service.simulator.analytic import AnalyticStepCost

from .conftest import load


class _Described(AnalyticStepCost):
    """The analytic model, describing itself by the server layout it was bound to."""

    def describe(self) -> str:
        return f"analytic steps at TP{self.server.tp_size}"


def _binder(scenario):  # noqa: ANN001, ANN202 - BindCost
    model = resolve_model(scenario.model)
    return model, lambda server: _Described(model=model, hardware=scenario.hardware, server=server)


def _bench(scenario, prompts: int):  # noqa: ANN001, ANN202
    return msgspec.structs.replace(scenario, bench=msgspec.structs.replace(scenario.bench, num_prompts=prompts))


def test_the_round_carries_the_step_models_description() -> None:
    scenario = _bench(load("coding-assistant-round0"), 40)
    model, bind = _binder(scenario)
    result = simulate_round(scenario, model, bind, seed=3, cost_model="analytic")
    assert result.provenance.cost_model == "analytic"
    assert result.provenance.cost_model_detail == "analytic steps at TP8"


def test_a_split_round_names_each_role_with_its_own_description() -> None:
    base = _bench(load("coding-assistant-round0"), 40)
    server = base.deployment.groups[0].server
    groups = [WorkerGroup(name="prefill", role="prefill", replicas=1, server=msgspec.structs.replace(server, tp_size=4)),
              WorkerGroup(name="decode", role="decode", replicas=2, server=msgspec.structs.replace(server, tp_size=2))]
    router = RouterConfig(policy="round_robin", prefill_policy="round_robin", decode_policy="round_robin")
    scenario = msgspec.structs.replace(base, deployment=Deployment(router=router, groups=groups))
    model, bind = _binder(scenario)
    result = simulate_round(scenario, model, bind, seed=3, cost_model="analytic")
    assert result.bench.completed == 40
    assert result.provenance.cost_model_detail == "prefill: analytic steps at TP4 | decode: analytic steps at TP2"


def test_a_server_with_pipeline_stages_says_how_its_stages_were_simulated() -> None:
    base = _bench(load("coding-assistant-round0"), 24)
    group = base.deployment.groups[0]
    server = msgspec.structs.replace(group.server, tp_size=4, pp_size=2)
    scenario = msgspec.structs.replace(base, deployment=Deployment(groups=[msgspec.structs.replace(group,
                                                                                                    server=server)]))
    model, bind = _binder(scenario)
    note = simulate_round(scenario, model, bind, seed=3, cost_model="analytic").provenance.note or ""
    assert "pipeline stages (pp-size 2) were simulated as one instance running every layer in turn" in note
    plain = simulate_round(base, model, bind, seed=3, cost_model="analytic").provenance.note or ""
    assert "pipeline stages" not in plain


def test_prompts_drawn_past_the_context_window_are_counted_in_the_note() -> None:
    base = _bench(load("coding-assistant-round0"), 40)
    model, _ = _binder(base)
    short = msgspec.structs.replace(model, max_context=4096)  # a 4k window, as Llama-2's
    workload = msgspec.structs.replace(base.workload, input=msgspec.structs.replace(
        base.workload.input, median=3000, p95=6000))
    scenario = msgspec.structs.replace(base, workload=workload)
    bind = lambda server: _Described(model=short, hardware=scenario.hardware, server=server)  # noqa: E731
    note = simulate_round(scenario, short, bind, seed=3, cost_model="analytic").provenance.note or ""
    assert f"past {short.name}'s context window of 4,096 tokens and cut to it; SGLang refuses" in note
    plain = simulate_round(base, model, _binder(base)[1], seed=3, cost_model="analytic").provenance.note or ""
    assert "context window" not in plain
