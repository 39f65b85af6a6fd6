"""`sglang-tuner` commands (placeholder until implemented)."""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    """Add this module's commands to the CLI."""
