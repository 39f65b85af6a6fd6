"""The job budget: candidate rounds and GPU-minutes (simulated or real, as the runner reports them)."""

from __future__ import annotations

from dataclasses import dataclass

from service.domain import RoundResult


@dataclass
class Budget:
    """What a job may still spend. GPU-minutes count every repeat: GPUs held x benchmark duration."""

    max_rounds: int
    max_gpu_minutes: float | None = None
    rounds_used: int = 0
    gpu_minutes_used: float = 0.0

    def charge(self, results: list[RoundResult], gpus: int) -> None:
        """Account one measured round (baseline rounds are charged GPU-minutes but not a round)."""
        self.gpu_minutes_used += sum(r.bench.duration for r in results) * gpus / 60.0

    def count_round(self) -> None:
        self.rounds_used += 1

    def exhausted(self) -> str | None:
        """Why the budget is spent, or None while there is budget left."""
        if self.rounds_used >= self.max_rounds:
            return f"round budget spent ({self.rounds_used} of {self.max_rounds} rounds)"
        if self.max_gpu_minutes is not None and self.gpu_minutes_used >= self.max_gpu_minutes:
            return (f"GPU-minute budget spent ({self.gpu_minutes_used:.1f} of "
                    f"{self.max_gpu_minutes:.1f} GPU-minutes)")
        return None
