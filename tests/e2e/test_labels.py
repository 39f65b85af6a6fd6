"""Every pattern label says only what its round's figures show, for every round of every built-in playbook.

The label is read from the figures the report prints for the round (output throughput, median and p99
TTFT, median ITL: means over the repeats, compared pair by pair with the baseline) and their noise band
(docs/policies.md, "The pattern table"). Each label's words are checked against those figures: a
"throughput_down" label needs throughput down by at least the minimum effect, "latency_up" a latency
figure up by at least its own, "flat" no change beyond noise, and so on. A +0.3% or a +9% round is never
"throughput_down".

The five casebook playbooks run on their own scenarios, `auto` on the structured-output API's; moe-at-scale
with one repeat, as in test_playbooks.py (its changes are tens of percent, far outside the noise).
"""

from __future__ import annotations

import asyncio
import math

import pytest

from policies import PolicySettings
from service import Pattern, Round, mean_result
from service.engine import TuningOutcome, run_playbook
from service.playbooks import playbook_scenario
from service.plugin_host import PluginHost

HOST = PluginHost()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("simulated" not in HOST.components("runner") or "casebook" not in HOST.components("policy"),
                       reason="needs the simulated runner and the casebook policy"),
]
PLAYBOOKS = ("coding-assistant", "document-qa-rag", "nightly-batch", "structured-output", "moe-at-scale", "auto")
SCENARIO_OF = {"auto": "structured-output"}
REPEATS = {"moe-at-scale": 1}
SETTINGS = PolicySettings()  # the casebook policy the host registers runs on the defaults
LATENCY = {"median_ttft_ms": SETTINGS.min_median_change, "median_itl_ms": SETTINGS.min_median_change,
           "p99_ttft_ms": SETTINGS.min_tail_change}


@pytest.fixture(scope="module")
def outcomes():  # type: ignore[no-untyped-def]
    """One job per playbook, run the first time a test asks for it (seed 0, the CLI's default)."""
    done: dict[str, TuningOutcome] = {}

    def outcome(name: str) -> TuningOutcome:
        if name not in done:
            playbooks = HOST.components("playbook")
            scenario = playbook_scenario(playbooks[SCENARIO_OF.get(name, name)])
            done[name] = asyncio.run(run_playbook(HOST, playbooks[name], scenario, runner="simulated",
                                                  repeats=REPEATS.get(name)))
        return done[name]

    return outcome


class Figure:
    """One label figure of a decision: its change and whether it moved beyond its noise band."""

    def __init__(self, figures: dict[str, float], key: str, minimum: float, lower_is_better: bool) -> None:
        self.change = figures[f"{key}.change"]
        p, p_adjusted = figures.get(f"{key}.p"), figures.get(f"{key}.p_adjusted")
        improves = (self.change < 0) == lower_is_better and self.change != 0
        large = abs(self.change) >= minimum
        self.measured = p_adjusted is not None
        self.better = self.measured and large and improves and p_adjusted < SETTINGS.alpha_improvement
        self.worse = self.measured and large and not improves and p is not None and p < SETTINGS.alpha_regression
        # A large rise noise cannot rule out: counted as worse by the policy's fail-safe second reading.
        self.maybe_worse = self.measured and large and not improves


def label_figures(figures: dict[str, float]) -> tuple[Figure, list[Figure]]:
    throughput = Figure(figures, "output_throughput", SETTINGS.min_throughput_change, lower_is_better=False)
    return throughput, [Figure(figures, key, minimum, lower_is_better=True) for key, minimum in LATENCY.items()]


def check_label(pattern: Pattern, figures: dict[str, float]) -> list[str]:
    """What the label claims that its figures contradict (empty when it matches)."""
    tp, latency = label_figures(figures)
    wrong = []
    says = pattern.value
    if "throughput_up" in says and not tp.better:
        wrong.append(f"throughput_up but output throughput {tp.change:+.1%} is not up beyond noise")
    if "throughput_down" in says and not (tp.maybe_worse and tp.change < 0):
        wrong.append(f"throughput_down but output throughput {tp.change:+.1%} is not down by the minimum effect")
    if ("throughput_flat" in says or pattern in (Pattern.MEDIAN_FLAT_P99_DOWN, Pattern.NOTHING_CHANGED)) and (
            tp.better or tp.worse):
        wrong.append(f"{says} but output throughput {tp.change:+.1%} moved beyond noise")
    if says.endswith("latency_up") and not any(f.maybe_worse for f in latency):
        wrong.append(f"{says} but no latency figure rose by its minimum effect")
    if says.endswith("latency_down") and (not any(f.better for f in latency) or any(f.worse for f in latency)):
        wrong.append(f"{says} but latency is not down beyond noise, or a latency figure rose")
    if says.endswith("latency_flat") and any(f.better or f.worse for f in latency):
        wrong.append(f"{says} but a latency figure moved beyond noise")
    if says.endswith("tail_down_a_lot") and not any(f.better and -f.change >= SETTINGS.tail_tradeoff_change
                                                    for f in latency):
        wrong.append(f"{says} but no latency figure fell by {SETTINGS.tail_tradeoff_change:.0%} beyond noise")
    if pattern is Pattern.LATENCY_TRADEOFF and not (
            any(f.better and -f.change >= SETTINGS.tail_tradeoff_change for f in latency)
            and any(f.maybe_worse for f in latency)):
        wrong.append(f"{says} but no latency figure fell a lot while another rose")
    if pattern is Pattern.MEDIAN_FLAT_P99_DOWN and not (latency[2].better and not latency[0].worse
                                                         and not latency[1].worse):
        wrong.append(f"{says} but p99 TTFT {latency[2].change:+.1%} did not fall beyond noise with the medians flat")
    if pattern is Pattern.NOTHING_CHANGED and any(f.better or f.worse for f in latency):
        wrong.append(f"{says} but a latency figure moved beyond noise")
    return wrong


def judged(outcome: TuningOutcome) -> list[Round]:
    """The rounds a policy labelled (the engine's own closures, such as a quality refusal, carry no label)."""
    return [r for r in outcome.job.rounds if r.decision is not None and r.decision.policy == "casebook"]


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_every_label_matches_its_figures(outcomes, name: str) -> None:  # type: ignore[no-untyped-def]
    rounds = judged(outcomes(name))
    assert rounds, f"{name}: no round was judged by the casebook policy"
    for round_ in rounds:
        decision = round_.decision
        assert decision is not None
        if decision.pattern is Pattern.NOT_APPLICABLE:
            continue
        wrong = check_label(decision.pattern, decision.figures)
        assert not wrong, f"{name} round {round_.index} ({round_.delta.summary if round_.delta else ''}): {wrong}"


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_labels_read_the_figures_the_report_prints(outcomes, name: str) -> None:  # type: ignore[no-untyped-def]
    for round_ in judged(outcomes(name)):
        decision = round_.decision
        assert decision is not None
        if decision.pattern is Pattern.NOT_APPLICABLE or not round_.results:
            continue
        printed = mean_result(round_.results).bench  # the report's row for this round
        for key in ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms"):
            assert math.isclose(decision.figures[f"{key}.candidate"], getattr(printed, key), rel_tol=1e-9)
        change = decision.figures["output_throughput.change"]
        if change > 0:  # the +0.3% and +9% rounds: never "throughput_down", whatever latency did
            assert "throughput_down" not in decision.pattern.value, (name, round_.index, change)
