"""Contract suites every component of a kind must pass; built-ins and third-party plugins alike.

Each suite is a test class: subclass it in your plugin's tests and provide the component as a fixture
(`technique`, `runner`, `policy`, `cost_model` or `playbook`). See `docs/plugins.md`.
"""

from service.testing.contracts.cost_model import CostModelContract
from service.testing.contracts.playbook import PlaybookContract
from service.testing.contracts.policy import PolicyContract
from service.testing.contracts.runner import RunnerContract
from service.testing.contracts.technique import TechniqueContract

__all__ = ["CostModelContract", "PlaybookContract", "PolicyContract", "RunnerContract", "TechniqueContract"]
