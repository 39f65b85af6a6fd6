"""The shipped playbook contract, run against every built-in playbook."""

from __future__ import annotations

import pytest

from service import Playbook
from service.testing import PlaybookContract, make_host

PLAYBOOKS = make_host(builtins=True).components("playbook")


class TestEveryPlaybook(PlaybookContract):
    @pytest.fixture(params=sorted(PLAYBOOKS))
    def playbook(self, request: pytest.FixtureRequest) -> Playbook:
        return PLAYBOOKS[request.param]


def test_the_casebooks_five_playbooks_and_auto_are_built_in() -> None:
    assert {"coding-assistant", "document-qa-rag", "nightly-batch", "structured-output", "moe-at-scale",
            "auto"} <= set(PLAYBOOKS)
