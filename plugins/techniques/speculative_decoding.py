"""Speculative decoding (EAGLE3 with a known draft, else the model's own MTP layer): below the break-even
concurrency; removed near the threshold batch size."""

from __future__ import annotations

import math
from typing import ClassVar

import msgspec

from plugins.techniques._rules import (
    SPECULATIVE_BREAK_EVEN,
    SPECULATIVE_RESET,
    concurrency_per_instance,
    graphs_for,
    main_server,
    measured_concurrency_per_instance,
    threshold_batch_size,
    tried_deltas,
)
from service import Applicability, ConfigDelta, Technique, TuningContext, keeps_mixed_chunk

OFF = {"speculative_algorithm": None, "speculative_draft_model_path": None, "speculative_num_steps": None,
       "speculative_eagle_topk": None, "speculative_num_draft_tokens": None}
# Casebook case 2: input >> output (68:1) leaves speculative decoding minimal benefit.
INPUT_DOMINANT = 20.0
# Casebook "Concurrency vs. Threshold Batch Size": concurrency near the threshold batch (case 3: 256 of 295,
# 0.87) is the transition zone where speculative decoding is detrimental. Within 30% of it counts as near.
TRANSITION_ZONE = 0.7
# Casebook case 3 round 2 removed speculation that accepted 2.14 tokens per verify step of 6 drafted (accept
# rate 0.357: "it's better to turn it off"); case 1 kept it at 3.82 of 6 (0.637). Below LOW_ACCEPT_RATE of the
# drafted tokens most drafted work is thrown away, whatever the concurrency: removal is measured.
LOW_ACCEPT_RATE = 0.4
# SGLang's draft tokens when --speculative-num-draft-tokens is unset (`_auto_choose_speculative_params`).
DEFAULT_DRAFT_TOKENS = 4


def break_even_concurrency(ctx: TuningContext) -> float:
    """Concurrency per instance where speculation stops paying (casebook case 1: 128 of a 206 threshold)."""
    return SPECULATIVE_BREAK_EVEN * threshold_batch_size(ctx.scenario)


def zone(c: float, threshold: float, even: float) -> str | None:
    """Why concurrency `c` per instance is too high for speculation, or None while it can pay.

    Casebook case 1's break-even table (reversal at 128 of 206) and the five-case comparison
    ("Concurrency ~ Threshold Batch (case 3: 256 vs 295): transition zone, speculative decoding detrimental").
    """
    if c >= threshold:
        return "at or above the threshold batch: decode is compute-bound and the draft takes compute from real work"
    if c >= TRANSITION_ZONE * threshold:
        return ("within 30% of the threshold batch, the casebook's transition zone where speculative decoding "
                "is detrimental (case 3)")
    if c >= even:
        return "past the break-even the casebook measured (case 1: 0.97x at concurrency 128 of 206)"
    return None


def low_acceptance(ctx: TuningContext) -> str | None:
    """Why the speculation the last kept round ran throws most drafted work away, or None (nothing measured,
    or it accepted LOW_ACCEPT_RATE of its drafted tokens or more)."""
    measured = ctx.baseline.server.spec_accept_length if ctx.baseline is not None else None
    drafted = main_server(ctx.scenario).speculative_num_draft_tokens or DEFAULT_DRAFT_TOKENS
    if measured is None or measured / drafted >= LOW_ACCEPT_RATE:
        return None
    return (f"it accepted {measured:.2f} tokens per verify step of {drafted} drafted (rate {measured / drafted:.2f}) "
            "in the last kept round")


def _running_slots(ctx: TuningContext) -> int | None:
    """Running-request slots to keep when speculation is added above SGLang's reset, else None.

    SGLang resets an unset --max-running-requests to 48 under EAGLE-family speculation
    (`arg_groups/speculative_hook.py`); where the last kept round held more requests per instance than that,
    the rest would queue, and the round would measure the queue rather than the speculation. The slots cover
    requests each instance may be sent: the measured concurrency or the clients' share, whichever is larger
    (rounded up to a multiple of 16).
    """
    if main_server(ctx.scenario).max_running_requests is not None:
        return None
    c = max(measured_concurrency_per_instance(ctx)[0], concurrency_per_instance(ctx.scenario))
    if c <= SPECULATIVE_RESET:
        return None
    return int(math.ceil(c / 16) * 16)


def draft_model(ctx: TuningContext) -> str:
    """The EAGLE3 draft for the current model: the scenario's own, else the one the model is known to have."""
    return ctx.scenario.workload.speculative.draft_model or ctx.model.eagle3_draft


class SpeculativeDecoding(Technique):
    """Adds EAGLE3 (steps 5, topk 8, draft tokens 6) at low concurrency, removes it near the threshold."""

    name: ClassVar[str] = "speculative_decoding"
    rank: ClassVar[int] = 7
    description: ClassVar[str] = ("Uses spare compute below the threshold batch size (case 1: +66%); near it the "
                                  "draft steals compute and it is removed (case 3: +20% without it).")
    # Speculation multiplies the tokens of each decode step (the verify batch), so the all-reduce a TP rank
    # pays per step and the memory-bound share of it change: TP against replicas is judged again on the
    # deployment with EAGLE3 on (casebook case 1 splits TP8 after EAGLE3).
    reopens: ClassVar[tuple[str, ...]] = ("parallelism",)

    def applicable(self, ctx: TuningContext) -> Applicability:
        """Judged on the concurrency each instance measured in the last accepted round (the client's when
        nothing was measured yet), whether speculation is on already or not."""
        on = main_server(ctx.scenario).speculative_algorithm is not None
        c, source = measured_concurrency_per_instance(ctx)
        threshold = threshold_batch_size(ctx.scenario)
        even = break_even_concurrency(ctx)
        figures = (f"{source} concurrency {c:.0f} per instance, threshold batch {threshold:.0f}, "
                   f"break-even about {even:.0f}")
        too_high = zone(c, threshold, even)
        if on:
            if too_high:
                return Applicability(True, f"Speculation is on {too_high} ({figures}): remove it (casebook case 3 "
                                           "round 2: +20% without it).")
            if low := low_acceptance(ctx):
                return Applicability(True, f"Speculation is on but {low}: remove it and measure (casebook case 3 "
                                           "round 2 removed it at 2.14 of 6, rate 0.357; case 1 kept it at 3.82, "
                                           "0.637).")
            return Applicability(False, f"Speculation is on and still pays ({figures}).")
        if too_high:
            return Applicability(False, f"Not added: concurrency is {too_high} ({figures}).")
        if any(d.set_server.get("speculative_algorithm", "") is None for d in tried_deltas(ctx, self.name)):
            return Applicability(False, "Not added back: this job measured speculation on this traffic and removed "
                                        f"it ({figures}).")
        workload = ctx.scenario.workload
        if workload.input.median >= INPUT_DOMINANT * max(1, workload.output.median):
            return Applicability(False, "Input dominates output, so a decode-side speed-up has minimal benefit "
                                        "(casebook case 2).")
        if not draft_model(ctx) and not ctx.model.mtp_layers:
            return Applicability(False, f"No EAGLE3 draft model is known for {ctx.scenario.model}, and it carries no "
                                        "MTP layer to draft with: a draft is trained for one target model, so none is "
                                        "made up; name one in workload.speculative.draft_model (a Hugging Face id or "
                                        f"a folder) to try speculative decoding ({figures}).")
        return Applicability(True, f"Concurrency is below the break-even ({figures}): spare compute can verify "
                                   "drafted tokens (casebook case 1 round 3; its H200 table still measured 1.28x "
                                   "at concurrency 64), and the measurement decides.")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        deltas = self._propose(ctx)
        if not deltas or not deltas[0].set_server.get("speculative_algorithm"):
            return deltas
        delta, changes, notes = deltas[0], dict(deltas[0].set_server), []
        running = _running_slots(ctx)
        if running is not None:
            graphs, graph_note = graphs_for(running, ctx.scenario, main_server(ctx.scenario))
            changes.update(max_running_requests=running, **graphs)
            notes.append(f"max-running-requests {running}{graph_note}")
        if main_server(ctx.scenario).enable_mixed_chunk and not keeps_mixed_chunk(ctx.scenario.sglang_version):
            # SGLang up to 0.5.18 turns mixed chunk off under EAGLE-family speculation: the flag goes, so the
            # launch command says what the server runs.
            changes["enable_mixed_chunk"] = False
            notes.append(f"mixed chunk off (SGLang {ctx.scenario.sglang_version} turns it off under speculation)")
        if not notes:
            return deltas
        return [msgspec.structs.replace(delta, set_server=changes, summary=", ".join([delta.summary, *notes]))]

    def _propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        even = break_even_concurrency(ctx)
        if main_server(ctx.scenario).speculative_algorithm is not None:
            c, source = measured_concurrency_per_instance(ctx)
            why = low_acceptance(ctx) if not zone(c, threshold_batch_size(ctx.scenario), even) else None
            return [ConfigDelta(technique=self.name, set_server=dict(OFF),
                                summary=f"remove speculative decoding ({why})" if why else
                                f"remove speculative decoding ({source} concurrency {c:.0f} per instance, "
                                f"threshold batch {threshold_batch_size(ctx.scenario)})", simplifies=True)]
        draft = draft_model(ctx)
        if not draft:
            # The model's own multi-token-prediction layer drafts (DeepSeek, GLM-5, Qwen3.5 MoE). SGLang's own
            # choice for MTP is 3 steps, top-1, 4 draft tokens (`_auto_choose_speculative_params`); the draft path
            # is the model itself, which Qwen3.5 needs and DeepSeek accepts.
            return [ConfigDelta(
                technique=self.name,
                summary=f"NEXTN (the model's MTP layer) steps 3 / topk 1 / draft 4 (break-even near concurrency "
                        f"{even:.0f})",
                set_server={"speculative_algorithm": "NEXTN", "speculative_draft_model_path": ctx.scenario.model,
                            "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                            "speculative_num_draft_tokens": 4})]
        return [ConfigDelta(
            technique=self.name,
            summary=f"EAGLE3 steps 5 / topk 8 / draft 6 (break-even near concurrency {even:.0f})",
            set_server={"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": draft,
                        "speculative_num_steps": 5, "speculative_eagle_topk": 8,
                        "speculative_num_draft_tokens": 6})]
