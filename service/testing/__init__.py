"""Test support for plugin authors: fixtures (a pytest plugin) and the component contract suites.

Use it from a plugin package's tests:

    from service.testing import TechniqueContract

    class TestMyTechnique(TechniqueContract):
        @pytest.fixture
        def technique(self):
            return MyTechnique()

The `sglang_tuner_host` fixture builds an isolated plugin host with only the plugins you pass.
Names load on first use: the pytest plugin (`service.testing.fixtures`) loads in every pytest run of an
environment where sglang-tuner is installed, and must not pull in the engine for runs that never use it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # what type checkers and editors see; at run time `__getattr__` loads each on first use
    from service.testing.contracts import (
        CostModelContract,
        PlaybookContract,
        PolicyContract,
        RunnerContract,
        TechniqueContract,
    )
    from service.testing.fixtures import make_host
    from service.testing.rounds import make_round
    from service.testing.scenarios import CASES, casebook_context, casebook_scenario, one_worker, unstartable

# The suites live outside test modules; without this their failing asserts would print no values.
pytest.register_assert_rewrite("service.testing.contracts")

_HOMES = {
    "TechniqueContract": "service.testing.contracts",
    "RunnerContract": "service.testing.contracts",
    "PolicyContract": "service.testing.contracts",
    "CostModelContract": "service.testing.contracts",
    "PlaybookContract": "service.testing.contracts",
    "make_host": "service.testing.fixtures",
    "make_round": "service.testing.rounds",
    "CASES": "service.testing.scenarios",
    "casebook_context": "service.testing.scenarios",
    "casebook_scenario": "service.testing.scenarios",
    "one_worker": "service.testing.scenarios",
    "unstartable": "service.testing.scenarios",
}

__all__ = [
    "CASES", "CostModelContract", "PlaybookContract", "PolicyContract", "RunnerContract", "TechniqueContract",
    "casebook_context", "casebook_scenario", "make_host", "make_round", "one_worker", "unstartable",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'service.testing' has no attribute {name!r}")
    return getattr(import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
