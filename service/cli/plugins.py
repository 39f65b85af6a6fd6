"""`sglang-tuner plugins`: list every registered component."""

from __future__ import annotations

import click
import msgspec

from service.plugin_host import PluginHost


def register(main: click.Group) -> None:
    main.add_command(plugins_command)


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: kind, name, plugin, version per component.")
def plugins_command(as_json: bool) -> None:
    """List techniques, runners, policies, cost models and playbooks, and which plugin provides each."""
    listing = PluginHost().listing()
    if as_json:
        click.echo(msgspec.json.encode(listing).decode())
        return
    for item in listing:
        click.echo(f"{item.kind:<11} {item.name:<24} {item.plugin} {item.version}")
