"""`sglang-tuner mcp`: serve the tuner's tools to LLM agents over stdio (Model Context Protocol)."""

from __future__ import annotations

import anyio
import click

from service.mcp import run_stdio


def register(main: click.Group) -> None:
    """Add `mcp` to the CLI."""
    main.add_command(mcp_command)


@click.command("mcp")
def mcp_command() -> None:
    """Run the MCP server over stdio (configure it as a command in an MCP client such as an IDE agent).

    Tools: profile_workload, plan_capacity, diagnose_benchmark, recommend_playbook, render_launch_commands,
    validate_config, and the job tools. Logs go to stderr; stdout carries only protocol messages.
    """
    anyio.run(run_stdio)
