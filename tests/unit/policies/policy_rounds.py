"""Synthetic benchmark rounds for the policy tests: the ones the shipped policy contract uses."""

from service.testing.rounds import make_round

__all__ = ["make_round"]
