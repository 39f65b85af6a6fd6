"""`sglang-tuner` command line: one module per command, each a thin adapter over the service.

Command modules load lazily, so `sglang-tuner calc ...` never pays for the HTTP or MCP stacks and a
broken optional module cannot take the other commands down.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from service.logs import configure_logging

# command name -> module under service.cli whose `register(group)` adds it
COMMANDS: dict[str, str] = {
    "calc": "calc",
    "calibrate": "calibrate",
    "calibrations": "calibrate",
    "diagnose": "diagnose",
    "emulate": "emulate",
    "flags": "render",
    "keys": "keys",
    "mcp": "mcp",
    "plugins": "plugins",
    "profile": "profile",
    "render": "render",
    "round": "simulate",
    "serve": "serve",
    "tune": "tune",
    "validate": "render",
}


class LazyCommands(click.Group):
    """A click group that imports a command's module only when the command is used or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, module in COMMANDS.items() if importlib.util.find_spec(
            f"service.cli.{module}") is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module_name = COMMANDS.get(cmd_name)
        if module_name is None:
            return None
        module = importlib.import_module(f"service.cli.{module_name}")
        holder = click.Group()
        module.register(holder)
        return holder.commands.get(cmd_name)


@click.group(cls=LazyCommands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]), help="Log verbosity.")
@click.version_option(package_name="sglang-tuner")
def main(log_level: str) -> None:
    """Tune SGLang deployments to their SLO at the lowest cost."""
    configure_logging(log_level)


__all__ = ["COMMANDS", "main"]
