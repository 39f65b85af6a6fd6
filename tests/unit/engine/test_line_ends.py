"""Choosing between line ends when none meets every SLO target.

The policy judges two ends as it judges a round, on the seeds both were measured on. A branch far closer to
a missed target can still read as noise on the other figures (casebook case 1 at 512 streams: p95 TTFT near
1.9 s against the main line's 8 s for a 1 s target, with throughput +33% at p=0.17); the job then handed back
the farther deployment. An end closer to every missed target on every shared seed, meeting every target the
other meets, wins (`closer_on_every_seed`); with fewer than 3 shared seeds nothing is decided that way.
"""

from __future__ import annotations

from service import SLO, Objective, Scenario
from service.engine.beam import Line, closer_on_every_seed
from tests.unit.engine.fakes import ok_result, scenario

TARGET = SLO(ttft_p95_ms=1000.0, itl_median_ms=50.0)


class ChecksOnly:
    """A policy whose SLO checks are the engine's own (it has no `slo_checks`)."""

    name = "checks-only"


def _line(root: int | None, p95: list[float], itl: float = 6.0) -> Line:
    start: Scenario = scenario(slo=TARGET)
    return Line(root=root, accepted=start,
                baseline=[ok_result(output_throughput=25000.0, p95_ttft_ms=v, median_itl_ms=itl) for v in p95])


def _closer(line: Line, best: Line) -> bool:
    return closer_on_every_seed(ChecksOnly(), line, best, scenario(slo=TARGET, objective=Objective(kind="throughput")))


def test_an_end_closer_to_the_missed_target_on_every_shared_seed_wins() -> None:
    main = _line(None, [8100.0, 7900.0, 8300.0, 7800.0, 8000.0, 8200.0], itl=2.6)
    branch = _line(1, [1900.0, 1700.0, 1500.0, 1650.0])
    assert _closer(branch, main)  # compared on the 4 seeds both have
    assert not _closer(main, branch)


def test_one_seed_the_other_way_fewer_than_three_seeds_or_a_newly_missed_target_decide_nothing() -> None:
    main = _line(None, [8100.0, 7900.0, 8300.0, 7800.0])
    assert not _closer(_line(1, [1900.0, 1700.0, 8400.0, 1650.0]), main)
    assert not _closer(_line(1, [1900.0, 1700.0]), main)
    # Closer on p95 TTFT but now missing the ITL target the main line met.
    assert not _closer(_line(1, [1900.0, 1700.0, 1500.0, 1650.0], itl=80.0), main)
    # Nothing missed by the other end: there is no target to be closer to.
    met = _line(None, [900.0, 800.0, 950.0])
    assert not _closer(_line(1, [500.0, 400.0, 450.0]), met)


def _engine(max_gpu_minutes: float | None = None):  # type: ignore[no-untyped-def]
    from service import Playbook
    from service.engine import EngineParts, TuningEngine
    from tests.unit.engine.fakes import FakeRunner, ThroughputPolicy, model_spec

    runner = FakeRunner(lambda _: {"output_throughput": 1000.0, "p95_ttft_ms": 1500.0, "median_itl_ms": 6.0})
    parts = EngineParts(techniques={}, runner=runner, policy=ThroughputPolicy(), resolve=model_spec)
    playbook = Playbook(name="p", techniques=[], max_gpu_minutes=max_gpu_minutes)
    return TuningEngine(parts, playbook, scenario(slo=TARGET)), runner


def test_every_line_end_is_measured_on_as_many_seeds_as_the_most_measured_one() -> None:
    import asyncio

    engine, runner = _engine()
    main = _line(None, [8100.0, 7900.0, 8300.0, 7800.0, 8000.0, 8200.0])
    branch = _line(1, [1900.0, 1700.0])
    engine.state.ends = [main]
    engine.state.line, engine.state.accepted, engine.state.baseline = 1, branch.accepted, list(branch.baseline)
    asyncio.run(engine._even_line_ends())
    # The walked branch (the current line) gets seeds 2..5; the main line already has six.
    assert [seed for _, seed in runner.calls] == [2, 3, 4, 5]
    assert len(engine.state.baseline) == 6 and len(main.baseline) == 6
    assert engine.budget.rounds_used == 0  # extra seeds use no round


def test_no_line_end_is_evened_once_the_gpu_minute_budget_is_spent() -> None:
    import asyncio

    engine, runner = _engine(max_gpu_minutes=1.0)
    engine.budget.gpu_minutes_used = 1.0
    engine.state.ends = [_line(None, [8100.0, 7900.0, 8300.0, 7800.0])]
    branch = _line(1, [1900.0, 1700.0])
    engine.state.line, engine.state.accepted, engine.state.baseline = 1, branch.accepted, list(branch.baseline)
    asyncio.run(engine._even_line_ends())
    assert runner.calls == [] and len(engine.state.baseline) == 2
