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
