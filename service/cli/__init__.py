"""`sglang-tuner` command line: one module per command, each a thin adapter over the service."""

from __future__ import annotations

import click

from service.cli import calc, plugins, profile, render, serve, simulate
from service.logs import configure_logging


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]), help="Log verbosity.")
@click.version_option(package_name="sglang-tuner")
def main(log_level: str) -> None:
    """Tune SGLang deployments to their SLO at the lowest cost."""
    configure_logging(log_level)


for module in (calc, plugins, profile, render, serve, simulate):
    module.register(main)

__all__ = ["main"]
