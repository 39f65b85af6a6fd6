"""The playbook contract: what the tuning engine relies on from every playbook.

A playbook is data. The engine walks its `techniques` (by name, in order or by rank), runs each round
`repeats` times with its `bench` settings on top of the scenario's, stops at its budget, and judges with
its `policy`; a name the plugin host does not know, or a key the decoder does not know, must fail at load,
not halfway through a job.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from service.components import Playbook
from service.domain import BenchSpec
from service.playbooks import check_playbook, load_playbook
from service.plugin_host import PluginHost
from service.scenario import load_scenario
from service.strict_toml import decode_data
from service.testing.fixtures import make_host


class PlaybookContract:
    """Subclass and provide a `playbook` fixture (the Playbook your plugin registers) to run the suite.

    Override `host` when the playbook names techniques, runners or policies of your own plugin, e.g.
    `make_host(("my_plugin", my_plugin), builtins=True)` (the default: the built-ins and nothing else).
    """

    @pytest.fixture
    def host(self) -> PluginHost:
        return make_host(builtins=True)

    def test_decodes_strictly(self, playbook: Playbook) -> None:
        assert isinstance(playbook, Playbook) and playbook.name
        data = msgspec.to_builtins(playbook)
        assert decode_data(data, Playbook, source=f"<playbook {playbook.name}>") == playbook
        if playbook.source:
            assert Path(playbook.source).is_file(), f"the playbook's file {playbook.source} is not installed"
            assert load_playbook(playbook.source) == playbook, "the registered playbook is what its file says"

    def test_names_only_registered_techniques_runner_and_policy(self, playbook: Playbook, host: PluginHost) -> None:
        check_playbook(playbook, techniques=host.components("technique"), runners=host.components("runner"),
                       policies=host.components("policy"))

    def test_budget_repeats_and_tolerance_are_usable(self, playbook: Playbook) -> None:
        assert playbook.max_rounds >= 1, "max_rounds below 1 would end every job after its baseline"
        assert playbook.repeats >= 1
        assert 1 <= playbook.beam_width <= 8, "beam_width counts the search's lines: 1 (no branches) to 8"
        assert playbook.max_gpu_minutes is None or playbook.max_gpu_minutes > 0
        assert 0.0 <= playbook.quality_tolerance < 1.0

    def test_bench_settings_are_bench_fields(self, playbook: Playbook) -> None:
        # The engine lays these over every round's bench; an unknown or mistyped one would fail the job.
        merged = msgspec.to_builtins(BenchSpec()) | dict(playbook.bench)
        decode_data(merged, BenchSpec, source=f"<playbook {playbook.name} bench>")

    def test_default_scenario_is_installed_and_loads(self, playbook: Playbook) -> None:
        if playbook.scenario is None:
            pytest.skip("no default scenario: `tune` asks for --scenario")
        assert Path(playbook.scenario).is_file(), f"the default scenario {playbook.scenario} is not installed"
        load_scenario(playbook.scenario)
