"""The grammar rule reads the backend the server already runs, not only an unset one (casebook case 4 table).

| backend    | dynamic schema | compile (complex schema) |
| xgrammar   | supported      | 40-400 ms                |
| llguidance | supported      | almost none              |
| outlines   | limited        | 40 s - 10 min, no recursion |

"If dynamic schemas are present, xgrammar or llguidance are the choices."
"""

from __future__ import annotations

from plugins.techniques.grammar import Grammar
from service import SLO
from tests.unit.techniques.scenarios import context, deployment, scenario, structured

GRAMMAR = Grammar()
MODEL = "zai-org/GLM-4.5-Air"


def on_backend(backend: str | None, *, dynamic: bool, warmed: bool = False):
    dep = deployment(MODEL, tp=4, grammar_backend=backend)
    scen = scenario(MODEL, "B200", 4, dep, clients=64, slo=SLO(ttft_p95_ms=1500, failure_rate_max=0.0))
    return context(structured(scen, dynamic=dynamic, schemas=0 if dynamic else 40, warmed=warmed))


def test_outlines_with_dynamic_schemas_is_replaced_by_llguidance() -> None:
    # Tenants register their own tools on a GLM-4.5-Air agent backend: every request may bring a new schema,
    # and outlines would compile each for minutes (the 440 s TTFT p95 a server left on outlines shows).
    ctx = on_backend("outlines", dynamic=True)
    verdict = GRAMMAR.applicable(ctx)
    assert verdict.applicable
    assert "outlines" in verdict.reason and "dynamic schemas" in verdict.reason and "llguidance" in verdict.reason
    [delta] = GRAMMAR.propose(ctx)
    assert delta.set_server == {"grammar_backend": "llguidance"}
    assert delta.summary == "grammar backend outlines -> llguidance"


def test_outlines_with_a_finite_set_of_schemas_is_kept_and_warmed() -> None:
    # Static schemas: outlines' precomputed FSM has the lowest per-token cost; its compile moves to startup.
    ctx = on_backend("outlines", dynamic=False)
    assert GRAMMAR.applicable(ctx).applicable
    [delta] = GRAMMAR.propose(ctx)
    assert not delta.set_server and delta.workload.structured_output.cache_warmed
    assert "warm_grammar.sh" in delta.artifacts


def test_a_none_backend_under_json_schema_gets_a_real_one() -> None:
    # `--grammar-backend none` leaves the JSON unconstrained: the failures the casebook's round 1 removed.
    ctx = on_backend("none", dynamic=False)
    verdict = GRAMMAR.applicable(ctx)
    assert verdict.applicable and "none" in verdict.reason
    assert GRAMMAR.propose(ctx)[0].set_server == {"grammar_backend": "xgrammar"}


def test_xgrammar_and_llguidance_with_dynamic_schemas_are_left_alone() -> None:
    for backend in ("xgrammar", "llguidance"):
        verdict = GRAMMAR.applicable(on_backend(backend, dynamic=True))
        assert not verdict.applicable
        assert f"{backend} suits dynamic schemas" in verdict.reason


def test_a_warmed_static_backend_needs_nothing() -> None:
    verdict = GRAMMAR.applicable(on_backend("xgrammar", dynamic=False, warmed=True))
    assert not verdict.applicable and "warmed" in verdict.reason


def test_an_unset_backend_under_json_schema_is_sglangs_xgrammar_and_is_warmed_not_set_again() -> None:
    # Requests already carry a JSON schema and `--grammar-backend` is unset: SGLang resolves it to xgrammar,
    # so "set xgrammar" would measure the starting deployment again. The step that changes something is
    # warming the finite set of schemas.
    ctx = on_backend(None, dynamic=False)
    verdict = GRAMMAR.applicable(ctx)
    assert verdict.applicable and "compile on first use" in verdict.reason
    [delta] = GRAMMAR.propose(ctx)
    assert not delta.set_server and delta.workload.structured_output.cache_warmed
    assert delta.summary == "warm the grammar cache (40 schemas)"


def test_an_unset_backend_with_dynamic_schemas_is_left_as_sglangs_xgrammar() -> None:
    verdict = GRAMMAR.applicable(on_backend(None, dynamic=True))
    assert not verdict.applicable
    assert "xgrammar (SGLang's default backend) suits dynamic schemas" in verdict.reason
    assert GRAMMAR.propose(on_backend(None, dynamic=True)) == []


def test_json_asked_for_in_the_prompt_only_gets_a_backend_and_schemas() -> None:
    ctx = on_backend(None, dynamic=False)
    ctx = context(structured(ctx.scenario, dynamic=False, schemas=40, mode="prompt_only"))
    assert GRAMMAR.applicable(ctx).applicable
    [delta] = GRAMMAR.propose(ctx)
    assert delta.set_server == {"grammar_backend": "xgrammar"}
    assert delta.workload.structured_output.mode == "json_schema"


def test_warming_on_outlines_says_how_long_a_new_server_compiles_before_taking_traffic() -> None:
    # Casebook case 4: outlines compiles a complex schema for 40 s to 10 min, one at a time. Warming is still
    # the step for a static set on it (its per-token cost is the lowest), but the startup it costs is said.
    [delta] = GRAMMAR.propose(on_backend("outlines", dynamic=False))
    assert delta.workload.structured_output.cache_warmed
    assert delta.summary == ("warm the grammar cache (40 schemas; on outlines each compiles for 40 s to 10 min, "
                             "about 40 min before a new server should take traffic)")
    [quick] = GRAMMAR.propose(on_backend("xgrammar", dynamic=False))
    assert quick.summary == "warm the grammar cache (40 schemas)"
