"""Diagnosis first: under the casebook's order, an applicable prompt-structure review precedes routing.

Casebook case 2, lessons learned: the prompt structure is reviewed before serving optimisation; while a
variable field breaks the prefix, cache-aware routing has nothing to match.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from service import Applicability, ConfigDelta, Playbook, Technique, TuningContext
from service.engine import EngineParts, TuningEngine
from tests.unit.engine.fakes import FakeRunner, ThroughputPolicy, chunk_figures, model_spec, scenario


class Routing(Technique):
    name: ClassVar[str] = "router_policy"
    rank: ClassVar[int] = 4

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(True, "replicas behind a router in this test")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="chunk 4096", set_server={"chunked_prefill_size": 4096})]


class PromptReview(Technique):
    name: ClassVar[str] = "prompt_structure"
    rank: ClassVar[int] = 4
    diagnoses_before: ClassVar[tuple[str, ...]] = ("router_policy",)

    def __init__(self, broken: bool) -> None:
        self.broken = broken

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(self.broken, "a variable field sits before the shared prefix" if self.broken
                             else "the prompt already puts fixed parts first")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="chunk 2048", set_server={"chunked_prefill_size": 2048})]


def _order(*, broken: bool, order: str) -> list[str]:
    parts = EngineParts(techniques={"router_policy": Routing(), "prompt_structure": PromptReview(broken)},
                        runner=FakeRunner(chunk_figures), policy=ThroughputPolicy(), resolve=model_spec)
    playbook = Playbook(name="p", techniques=["router_policy", "prompt_structure"], order=order)  # type: ignore[arg-type]
    outcome = asyncio.run(TuningEngine(parts, playbook, scenario()).run())
    return [r.technique for r in outcome.job.rounds[1:]] + [s.technique for s in outcome.skipped]


def test_an_applicable_prompt_review_runs_before_routing_under_the_casebook_order() -> None:
    assert _order(broken=True, order="casebook") == ["prompt_structure", "router_policy"]


def test_a_sound_prompt_leaves_the_order_alone() -> None:
    assert _order(broken=False, order="casebook") == ["router_policy", "prompt_structure"]


def test_a_listed_order_is_the_playbook_authors() -> None:
    assert _order(broken=True, order="listed") == ["router_policy", "prompt_structure"]
