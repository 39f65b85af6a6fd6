"""The plugin host: registration hooks, selection and event hooks, dedupe, env filtering."""

from types import SimpleNamespace

import pytest

from service import (
    Applicability,
    CostModel,
    Decision,
    Pattern,
    Playbook,
    Policy,
    RoundResult,
    Runner,
    RunnerCapabilities,
    Technique,
    Verdict,
    hookimpl,
)
from service.plugin_host import PLUGINS_ENV, DuplicateComponentError, PluginHost
from service.testing import make_host


class Tech(Technique):
    name = "demo_technique"
    rank = 3

    def applicable(self, ctx):
        return Applicability(True, "always applicable in this test")

    def propose(self, ctx):
        return []


class Run(Runner):
    name = "demo_runner"
    capabilities = RunnerCapabilities(restarts_servers=False, measures_real_gpus=False, needs_gpu=False)

    async def run_round(self, scenario, *, seed=None, context=None) -> RoundResult:
        raise NotImplementedError


class Pol(Policy):
    name = "demo_policy"

    def decide(self, baseline, candidate, slo, objective):
        return Decision(verdict=Verdict.INCONCLUSIVE, pattern=Pattern.NOTHING_CHANGED, reasons=["demo"])


class Cost(CostModel):
    name = "demo_cost"

    def available(self):
        return True

    def bind(self, model, hardware, server):
        raise NotImplementedError


def plugin(**hooks):
    """A plugin object from hook functions (pluggy accepts any namespace with marked functions)."""
    return SimpleNamespace(**{name: hookimpl(fn) for name, fn in hooks.items()})


def test_hook_register_techniques():
    host = make_host(("p", plugin(register_techniques=lambda register: register(Tech()))))
    assert list(host.components("technique")) == ["demo_technique"]
    assert host.listing()[0].plugin == "p"


def test_hook_register_runners():
    host = make_host(("p", plugin(register_runners=lambda register: register(Run()))))
    assert host.get("runner", "demo_runner").capabilities.needs_gpu is False


def test_hook_register_policies():
    host = make_host(("p", plugin(register_policies=lambda register: register(Pol()))))
    assert host.get("policy", "demo_policy").name == "demo_policy"


def test_hook_register_cost_models():
    host = make_host(("p", plugin(register_cost_models=lambda register: register(Cost()))))
    assert host.get("cost_model", "demo_cost").available()


def test_hook_register_playbooks():
    book = Playbook(name="demo", techniques=["demo_technique"])
    host = make_host(("p", plugin(register_playbooks=lambda register: register(book))))
    assert host.get("playbook", "demo") is book


def test_hook_select_cost_model():
    """First non-None result wins."""
    _first_non_none_wins()


def _first_non_none_wins():
    first = plugin(select_cost_model=lambda gpu, model: None)
    second = plugin(select_cost_model=lambda gpu, model: "roofline" if gpu == "L40S" else None)
    host = make_host(("a", first), ("b", second))
    assert host.hook.select_cost_model(gpu="L40S", model="m") == "roofline"
    assert host.hook.select_cost_model(gpu="H100-SXM", model="m") is None


def test_hook_on_round_started():
    seen = []
    host = make_host(("p", plugin(on_round_started=lambda job_id, round_index, technique: seen.append(
        (job_id, round_index, technique)))))
    host.hook.on_round_started(job_id="j", round_index=1, technique="chunked_prefill")
    assert seen == [("j", 1, "chunked_prefill")]


def test_hook_on_round_finished():
    seen = []
    host = make_host(("p", plugin(on_round_finished=lambda job_id, round_index, technique, verdict: seen.append(
        verdict))))
    host.hook.on_round_finished(job_id="j", round_index=1, technique="t", verdict="accept")
    assert seen == ["accept"]


def test_hook_on_job_finished():
    seen = []
    host = make_host(("p", plugin(on_job_finished=lambda job_id, state: seen.append((job_id, state)))))
    host.hook.on_job_finished(job_id="j", state="succeeded")
    assert seen == [("j", "succeeded")]


def test_duplicate_names_across_plugins_are_refused_naming_both():
    a = plugin(register_techniques=lambda register: register(Tech()))
    b = plugin(register_techniques=lambda register: register(Tech()))
    with pytest.raises(DuplicateComponentError, match="'a' and 'b'"):
        make_host(("a", a), ("b", b))


def test_registering_the_wrong_kind_is_a_type_error():
    with pytest.raises(TypeError, match="not a Technique"):
        make_host(("p", plugin(register_techniques=lambda register: register(Pol()))))


def test_misspelled_hook_names_fail_at_load():
    bad = SimpleNamespace(register_technique=hookimpl(lambda register: None))
    with pytest.raises(Exception, match="register_technique"):
        make_host(("bad", bad))


def test_unknown_component_suggests_the_nearest():
    host = make_host(("p", plugin(register_techniques=lambda register: register(Tech()))))
    with pytest.raises(KeyError, match="did you mean 'demo_technique'"):
        host.get("technique", "demo_techniqe")


def test_env_var_limits_which_entry_points_load(monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, "")
    assert PluginHost().listing() == []


def test_each_host_has_its_own_manager():
    one = make_host(("p", plugin(register_techniques=lambda register: register(Tech()))))
    two = make_host()
    assert one.pm is not two.pm and two.components("technique") == {}
