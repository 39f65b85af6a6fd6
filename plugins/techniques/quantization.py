"""FP8 weights and FP8 KV cache: half the bytes per decode step in the memory-bound region."""

from __future__ import annotations

from typing import ClassVar

from plugins.techniques._rules import main_server, measured_concurrency_per_instance, threshold_batch_size
from service import Applicability, ConfigDelta, FlagValue, Technique, TuningContext

ADOPT_AFTER_CHECK = "adopt only after a quality check"
# Below this fraction of the threshold batch decode is memory-bound (the casebook's "well below" region, as
# speculative decoding's transition zone starts at 70%).
MEMORY_BOUND = 0.7


class Quantization(Technique):
    """`--quantization fp8 --kv-cache-dtype fp8_e5m2` (casebook case 1 round 2, +31.5% throughput)."""

    name: ClassVar[str] = "quantization"
    rank: ClassVar[int] = 5
    description: ClassVar[str] = ("FP8 weights and FP8 KV halve the bytes read per decode step (1.3-1.5x); a "
                                  "quality check must pass before adoption when the playbook asks for one.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        server = main_server(ctx.scenario)
        stored = _stored_quantized(ctx)
        if not ctx.scenario.hardware.spec.supports_fp8:
            # SGLang runs FP8 weights through its Marlin weight-only kernel on sm80-88 GPUs
            # (fp8_utils.can_auto_enable_marlin_fp8): half the weight bytes, the arithmetic stays BF16. That
            # pays only where decode is memory-bound (casebook case 1 round 2: "halving the bytes read").
            if server.weight_dtype == "fp8":
                return Applicability(False, "Weights are already FP8 (Marlin weight-only on this GPU).")
            if stored:
                return Applicability(False, f"The checkpoint already stores its weights in {stored}; the KV "
                                            "cache stays BF16 on a GPU without FP8 attention.")
            c, source = measured_concurrency_per_instance(ctx)
            threshold = threshold_batch_size(ctx.scenario)
            figures = f"{source} concurrency {c:.0f} per instance, threshold batch {threshold:.0f}"
            if c >= MEMORY_BOUND * threshold:
                return Applicability(False, f"{ctx.scenario.hardware.gpu} has no FP8 tensor cores and decode is not "
                                            f"memory-bound ({figures}): weight-only FP8 saves memory, not time.")
            return Applicability(True, f"{ctx.scenario.hardware.gpu} has no FP8 tensor cores, but decode is "
                                       f"memory-bound ({figures}): FP8 weights (SGLang's Marlin weight-only kernel) "
                                       "halve the weight bytes read each step (casebook case 1 round 2).")
        if (server.weight_dtype == "fp8" or stored) and server.kv_dtype != "bf16":
            return Applicability(False, "Weights and KV cache are already FP8." if not stored else
                                 f"The checkpoint stores its weights in {stored} and the KV cache is already FP8.")
        if stored:
            return Applicability(True, f"The checkpoint already stores its weights in {stored}; an FP8 KV cache "
                                       "halves the KV bytes read each decode step and doubles the KV pool.")
        return Applicability(True, "Decode is memory-bound, so FP8 weights and KV halve the bytes read each step "
                                   "(casebook case 1 round 2: every metric improved at once).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        server = main_server(ctx.scenario)
        if not ctx.scenario.hardware.spec.supports_fp8:
            # Weight-only: the KV cache stays BF16 where attention has no FP8 arithmetic to run it on.
            changes: dict[str, FlagValue | None] = {"quantization": "fp8"}
            if server.mem_fraction_static is None:
                changes["mem_fraction_static"] = 0.90
            return [ConfigDelta(technique=self.name, summary="FP8 weights (Marlin weight-only)", set_server=changes,
                                quality_check=quality_check(ctx, self.name))]
        changes = {"kv_cache_dtype": "fp8_e5m2"}
        stored = _stored_quantized(ctx)
        if stored:
            # `--quantization fp8` on a checkpoint stored quantized is at best redundant (SGLang reads the
            # method from its config.json) and refused when the methods differ (an AWQ or GPTQ checkpoint).
            summary = f"FP8 KV (weights already {stored} in the checkpoint)"
        elif server.weight_dtype != "fp8":
            changes["quantization"] = "fp8"
            summary = "FP8 weights + FP8 KV"
        else:
            summary = "FP8 KV"
        if server.mem_fraction_static is None:
            changes["mem_fraction_static"] = 0.90  # the casebook's setting alongside FP8
        return [ConfigDelta(technique=self.name, summary=summary, set_server=changes,
                            quality_check=quality_check(ctx, self.name))]


def _stored_quantized(ctx: TuningContext) -> str:
    """How the checkpoint stores its weights when quantized to 8 bits or fewer, or in bits its config.json does
    not state ("FP8", "awq 4-bit", "compressed-tensors"), else ""."""
    bits, method = ctx.model.prequantized_bits, ctx.model.prequantized
    if not method or bits > 8:
        return ""
    # SGLang refuses `--quantization fp8` on a checkpoint stored with another method (`_verify_quantization`),
    # whether or not config.json states its bits (compressed-tensors keeps them in `config_groups`).
    if method in ("fp8", "fbgemm_fp8", "modelopt_fp8", "w8a8_fp8"):
        return "FP8"
    named = method if method != "unknown" else "a quantized format"
    return f"{named} {bits}-bit" if bits else named


def quality_check(ctx: TuningContext, technique: str) -> str | None:
    """What to check before FP8 is adopted, or None when a passing quality result already covers it.

    Casebook case 1 round 2: "Quality verification must be done concurrently. Quantization loss might not
    be visible in general conversations but can appear in code" (a blind evaluation of 50 code cases). The
    names are those the engine's quality gate looks up, most specific first.
    """
    model = ctx.scenario.model
    subjects = [f"{model}:{technique}", f"{model}:fp8", "fp8", technique]
    by_subject = {r.subject: r for r in ctx.scenario.quality}
    found = next((by_subject[s] for s in subjects if s in by_subject), None)
    if found is not None and found.acceptable:
        return None
    if found is None:
        why = f"no quality result for {subjects[0]!r} or {subjects[1]!r}"
    elif found.acceptable is None:
        why = f"the quality result for {found.subject!r} states no verdict (`acceptable`)"
    else:
        why = f"the quality result for {found.subject!r} did not pass"
    return (f"{ADOPT_AFTER_CHECK}: FP8 weights and KV can lose accuracy that general benchmarks miss, and {why}; "
            "compare against BF16 on the task's own cases (casebook case 1: 50 blind code cases)")
