"""`service.testing` itself: every public name loads, and its pytest plugin stays light."""

from __future__ import annotations

import subprocess
import sys

import service.testing


def test_every_public_name_loads_from_its_module() -> None:
    for name in service.testing.__all__:
        assert getattr(service.testing, name) is not None
    assert set(dir(service.testing)) >= set(service.testing.__all__)


def test_the_pytest_plugin_does_not_load_the_engine() -> None:
    # It loads in every pytest run of an environment with sglang-tuner installed, used or not.
    code = "import sys, service.testing.fixtures; print('service.engine' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
