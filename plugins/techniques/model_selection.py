"""Model downsizing: the smallest model whose user-supplied quality results are acceptable."""

from __future__ import annotations

import re
from typing import ClassVar

from plugins.techniques._rules import main_server
from service import Applicability, ConfigDelta, Technique, TuningContext, draft_after_switch, resolve_model

_SIZE = re.compile(r"(\d+(?:\.\d+)?)B\b", re.IGNORECASE)


def model_params(name: str) -> float | None:
    """Total parameters of a model id: from its shipped config, else from a size in its name ("9B")."""
    try:
        return resolve_model(name).params_total
    except (KeyError, OSError, ValueError):
        match = _SIZE.search(name)
        return float(match.group(1)) * 1e9 if match else None


def _is_technique_subject(subject: str) -> bool:
    """`<model>:<technique>` (`Qwen/Qwen3.6-27B:fp8`) rates a change of the model, not another model."""
    return ":" in subject.rsplit("/", 1)[-1]


class ModelSelection(Technique):
    """Propose smaller models that have quality results, smallest first; the engine's quality gate decides."""

    name: ClassVar[str] = "model_selection"
    rank: ClassVar[int] = 1
    description: ClassVar[str] = ("Throughput is inversely proportional to model size (case 3: 27B -> 9B, 2.75x), "
                                  "but a smaller model is never adopted without a passing quality result.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        candidates = self._candidates(ctx)
        if not candidates:
            return Applicability(False, "No quality results for smaller models: downsizing is never accepted "
                                        "without them (casebook case 3).")
        names = ", ".join(name for _, name in candidates)
        return Applicability(True, f"Quality results exist for smaller models ({names}); the minimum model that "
                                   "passes gives the largest gain of any technique (casebook tuning order 1).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary=f"model {name}{self._draft_note(ctx, name)}", model=name)
                for _, name in self._candidates(ctx)]

    @staticmethod
    def _draft_note(ctx: TuningContext, name: str) -> str:
        """What happens to a speculating server's draft: the new model's own, or none (the engine's model switch)."""
        server = main_server(ctx.scenario)
        if not server.speculative_draft_model_path:
            return ""
        draft = draft_after_switch(name, server.speculative_algorithm)
        kind = server.speculative_algorithm or "speculative"
        return f" ({kind} draft {draft})" if draft else f" (no {kind} draft known for it: speculative decoding off)"

    def _candidates(self, ctx: TuningContext) -> list[tuple[float, str]]:
        current = ctx.model.params_total
        found = []
        for result in ctx.scenario.quality:
            if result.subject == ctx.scenario.model or "/" not in result.subject or _is_technique_subject(result.subject):
                continue
            params = model_params(result.subject)
            if params is not None and params < current:
                found.append((params, result.subject))
        return sorted(found)
