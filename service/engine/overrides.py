"""What a playbook overrides in every scenario it runs: its quality results and its bench settings."""

from __future__ import annotations

import msgspec

from service.components import Playbook
from service.domain import Scenario


def with_playbook_quality(scenario: Scenario, playbook: Playbook) -> Scenario:
    """Quality results given in the playbook join the scenario's (the scenario's win on the same subject)."""
    if not playbook.quality:
        return scenario
    known = {q.subject for q in scenario.quality}
    extra = [q for q in playbook.quality if q.subject not in known]
    return msgspec.structs.replace(scenario, quality=[*scenario.quality, *extra])


def with_playbook_bench(scenario: Scenario, playbook: Playbook) -> Scenario:
    """The playbook's bench settings (round size, warm-up) override the scenario's for every round."""
    if not playbook.bench:
        return scenario
    fields = msgspec.to_builtins(scenario.bench) | dict(playbook.bench)
    try:
        bench = msgspec.convert(fields, type(scenario.bench))
    except msgspec.ValidationError as exc:
        raise ValueError(f"playbook {playbook.name!r}: invalid bench setting: {exc}") from exc
    return msgspec.structs.replace(scenario, bench=bench)
