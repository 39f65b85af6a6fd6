"""Guard tests: every hook is documented with its exact signature, and every hook has a test."""

import inspect
import re
from pathlib import Path

import pytest

from service import hookspecs

ROOT = Path(__file__).resolve().parents[1]
HOOKS = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
         if hasattr(fn, "sglang_tuner_spec")]


def _signature(name: str) -> str:
    params = inspect.signature(getattr(hookspecs, name)).parameters
    return f"{name}({', '.join(params)})"


def test_there_are_hooks():
    assert {"register_techniques", "register_runners", "on_job_finished"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented_with_its_signature(hook):
    docs = (ROOT / "docs" / "plugins.md").read_text()
    assert f"`{_signature(hook)}`" in docs


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test(hook):
    pattern = re.compile(rf"def test_hook_{hook}\b")
    assert any(pattern.search(p.read_text()) for p in (ROOT / "tests").rglob("test_*.py"))
