"""EAGLE3 speculative decoding: only well below the threshold batch size; removed near it."""

from __future__ import annotations

from typing import ClassVar

from plugins.techniques._rules import (
    SPECULATIVE_BREAK_EVEN,
    concurrency_per_instance,
    main_server,
    threshold_batch_size,
)
from service import Applicability, ConfigDelta, Technique, TuningContext

OFF = {"speculative_algorithm": None, "speculative_draft_model_path": None, "speculative_num_steps": None,
       "speculative_eagle_topk": None, "speculative_num_draft_tokens": None}
# Casebook case 2: input >> output (68:1) leaves speculative decoding minimal benefit.
INPUT_DOMINANT = 20.0


def break_even_concurrency(ctx: TuningContext) -> float:
    """Concurrency per instance where speculation stops paying (casebook case 1: 128 of a 206 threshold)."""
    return SPECULATIVE_BREAK_EVEN * threshold_batch_size(ctx.scenario)


class SpeculativeDecoding(Technique):
    """Adds EAGLE3 (steps 5, topk 8, draft tokens 6) at low concurrency, removes it near the threshold."""

    name: ClassVar[str] = "speculative_decoding"
    rank: ClassVar[int] = 7
    description: ClassVar[str] = ("Uses spare compute below the threshold batch size (case 1: +66%); near it the "
                                  "draft steals compute and it is removed (case 3: +20% without it).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        on = main_server(ctx.scenario).speculative_algorithm is not None
        c = concurrency_per_instance(ctx.scenario)
        threshold = threshold_batch_size(ctx.scenario)
        even = break_even_concurrency(ctx)
        figures = f"concurrency {c:.0f} per instance, threshold batch {threshold:.0f}, break-even about {even:.0f}"
        if on:
            if c >= even:
                return Applicability(True, f"Speculation is on near the threshold batch ({figures}): the draft "
                                           "takes compute from real work, so remove it (casebook case 3).")
            return Applicability(False, f"Speculation is on and still pays ({figures}).")
        workload = ctx.scenario.workload
        if workload.input.median >= INPUT_DOMINANT * max(1, workload.output.median):
            return Applicability(False, "Input dominates output, so a decode-side speed-up has minimal benefit "
                                        "(casebook case 2).")
        if c > even / 2:
            return Applicability(False, f"Not well below the threshold batch ({figures}): speculation is "
                                        "detrimental near it (casebook case 1 break-even table).")
        return Applicability(True, f"Concurrency is well below the threshold batch ({figures}): spare compute "
                                   "can verify drafted tokens (casebook case 1 round 3).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        even = break_even_concurrency(ctx)
        if main_server(ctx.scenario).speculative_algorithm is not None:
            return [ConfigDelta(technique=self.name, summary="remove speculative decoding", set_server=dict(OFF))]
        return [ConfigDelta(
            technique=self.name,
            summary=f"EAGLE3 steps 5 / topk 8 / draft 6 (break-even near concurrency {even:.0f})",
            set_server={"speculative_algorithm": "EAGLE3",
                        "speculative_draft_model_path": f"{ctx.scenario.model}-eagle3",
                        "speculative_num_steps": 5, "speculative_eagle_topk": 8,
                        "speculative_num_draft_tokens": 6})]
