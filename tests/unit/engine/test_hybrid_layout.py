"""A calibration fitted on one layout extrapolates to another: `hybrid` trusts its prediction of a candidate
whose replicas are laid out as none of the measured rounds' half as much."""

from __future__ import annotations

import asyncio

import msgspec

from plugins.runners.hybrid import UNSEEN_LAYOUT_FACTOR, HybridRunner, replica_layout
from tests.unit.engine.test_resume_hybrid import _engine


def test_a_layout_the_job_never_measured_doubles_the_uncertainty() -> None:
    engine, _ = _engine()
    runner, context = engine.parts.runner, engine.parts.round_context
    assert isinstance(runner, HybridRunner) and context is not None
    baseline = engine.initial
    asyncio.run(runner.run_round(baseline, seed=0, context=context))  # the TP8 baseline, measured
    group = baseline.deployment.groups[0]
    split = msgspec.structs.replace(baseline, deployment=msgspec.structs.replace(baseline.deployment, groups=[
        msgspec.structs.replace(group, replicas=4, server=msgspec.structs.replace(group.server, tp_size=2))]))
    assert (replica_layout(baseline), replica_layout(split)) == ("tp8", "tp2")

    seen = asyncio.run(runner.predict(baseline, [0], context))
    unseen = asyncio.run(runner.predict(split, [0], context))
    assert seen is not None and unseen is not None
    assert unseen.uncertainty == seen.uncertainty * UNSEEN_LAYOUT_FACTOR
    assert "(tp2) was not measured" in unseen.basis and "was not measured" not in seen.basis
