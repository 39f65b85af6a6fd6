"""Test support for plugin authors: fixtures (a pytest plugin) and the component contract suites.

Use it from a plugin package's tests:

    from service.testing import TechniqueContract

    class TestMyTechnique(TechniqueContract):
        @pytest.fixture
        def technique(self):
            return MyTechnique()

The `sglang_tuner_host` fixture builds an isolated plugin host with only the plugins you pass.
"""

from service.testing.contracts import TechniqueContract, casebook_context
from service.testing.fixtures import make_host

__all__ = ["TechniqueContract", "casebook_context", "make_host"]
