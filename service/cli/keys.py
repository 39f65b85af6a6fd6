"""`sglang-tuner keys`: create, list and revoke the service's API keys (run on the service's database)."""

from __future__ import annotations

from datetime import UTC, datetime

import click
import msgspec

from service.cli.database import db_option, with_store
from service.store import Scope


def register(main: click.Group) -> None:
    main.add_command(keys_group)


@click.group("keys")
def keys_group() -> None:
    """Manage API keys. Scopes: read (look), write (start and cancel jobs), admin (schedules, everything)."""


@keys_group.command("create")
@click.option("--name", required=True, help="Who or what uses the key (shown in `keys list`).")
@click.option("--scope", "scopes", multiple=True, type=click.Choice([s.value for s in Scope]), default=["read"],
              show_default=True, help="Repeat for several scopes; admin includes write, write includes read.")
@db_option
def create_command(name: str, scopes: tuple[str, ...], db_url: str) -> None:
    """Create a key and print its token once; only a hash is stored."""
    record, token = with_store(db_url, lambda store: store.create_api_key(name, [Scope(s) for s in scopes]))
    click.echo(token)
    click.echo(f"created {record.id} ({', '.join(s.value for s in record.scopes)}); "
               "store the token now, it cannot be shown again", err=True)


@keys_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@db_option
def list_command(as_json: bool, db_url: str) -> None:
    """List keys (never their secrets)."""
    keys = with_store(db_url, lambda store: store.list_api_keys())
    if as_json:
        click.echo(msgspec.json.encode([msgspec.structs.replace(k, secret_hash="") for k in keys]).decode())
        return
    for key in keys:
        state = "revoked" if key.revoked_at is not None else "active"
        created = datetime.fromtimestamp(key.created_at, UTC).strftime("%Y-%m-%d %H:%M")
        click.echo(f"{key.id:<22} {state:<8} {','.join(s.value for s in key.scopes):<18} {created}  {key.name}")


@keys_group.command("revoke")
@click.argument("key_id")
@db_option
def revoke_command(key_id: str, db_url: str) -> None:
    """Revoke a key by id; requests with it fail within seconds."""
    if not with_store(db_url, lambda store: store.revoke_api_key(key_id)):
        raise click.ClickException(f"no active key {key_id!r}; `sglang-tuner keys list` shows them")
    click.echo(f"revoked {key_id}")
