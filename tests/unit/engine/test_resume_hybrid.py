"""A resumed hybrid job learns again from the rounds its journal kept: the candidates after the restart are
screened on a calibration fitted on the baseline measured before it, as in the uninterrupted job, and none of
them is measured only because the runner forgot what it had measured."""

from __future__ import annotations

import asyncio
import dataclasses

import msgspec

from plugins.runners.hybrid import HybridRunner
from service.domain import RoundState
from service.engine import TuningEngine, parts_from_host
from service.playbooks import load_playbook, playbook_scenario
from service.plugin_host import PluginHost
from tests.runners.conftest import EXAMPLES
from tests.unit.engine.test_screen import Counted

PLAYBOOK = EXAMPLES.parent / "calibration" / "split-or-not.toml"


def _engine() -> tuple[TuningEngine, Counted]:
    """split-or-not with `hybrid` measuring on the simulator (so its predictions can be exact)."""
    host = PluginHost()
    playbook = load_playbook(PLAYBOOK)
    scenario = playbook_scenario(playbook)
    parts = parts_from_host(host, playbook, scenario, runner="simulated", cost_model="roofline")
    measurer = Counted(parts.runner)
    parts = dataclasses.replace(parts, runner=HybridRunner({"local": measurer}))
    return TuningEngine(parts, playbook, scenario, seed=0, parallel=1), measurer


def _predicted(engine: TuningEngine) -> list[int]:
    return [r.index for r in engine.job.rounds if r.decision is not None and r.decision.figures.get("predicted")]


def test_a_resumed_hybrid_job_screens_on_the_rounds_its_journal_kept() -> None:
    whole, measured = _engine()
    uninterrupted = asyncio.run(whole.run())
    predicted = _predicted(whole)
    fitted = whole.parts.round_context.measured.calibration if whole.parts.round_context else None
    # Measured by the simulator itself, the baseline is replayed exactly: the fit draws the round's own requests.
    assert fitted is not None and fitted.rms_error < 0.01
    assert predicted and measured.measured == len(whole.job.rounds) - len(predicted)
    # The job stopped right after its baseline: only round 0 is on record.
    history = [msgspec.msgpack.decode(msgspec.msgpack.encode(whole.job.rounds[0]), type=type(whole.job.rounds[0]))]
    assert history[0].state is RoundState.FINISHED and history[0].results

    engine, again = _engine()
    resumed = asyncio.run(engine.resume(history))
    # Nothing is measured again, and the rounds after the restart are screened as before: the baseline's
    # results (from the journal) calibrate the same predictions.
    assert again.measured == measured.measured - 1
    assert _predicted(engine) == predicted
    assert resumed.final.deployment == uninterrupted.final.deployment
    here = engine.parts.round_context.measured if engine.parts.round_context else None
    assert here is not None and len(here.rounds) == len(history[0].results) and here.calibration is not None
