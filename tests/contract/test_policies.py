"""The shipped policy contract, run against every policy the built-in plugins register."""

from __future__ import annotations

import pytest

from service import Policy
from service.testing import PolicyContract, make_host

POLICIES = make_host(builtins=True).components("policy")


class TestEveryPolicy(PolicyContract):
    @pytest.fixture(params=sorted(POLICIES))
    def policy(self, request: pytest.FixtureRequest) -> Policy:
        return POLICIES[request.param]


def test_the_casebook_policy_is_registered_as_the_default() -> None:
    assert "casebook" in POLICIES
