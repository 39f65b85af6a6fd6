"""`sglang-tuner profile LOG.jsonl --tokenizer DIR`: measure a workload profile from a request log."""

from __future__ import annotations

from pathlib import Path

import click
import msgspec

from service.domain import MeasuredProfile
from service.profile import ProfileError, TokenizerNotFound, profile_log


def register(main: click.Group) -> None:
    """Add the `profile` command to the CLI."""
    main.add_command(profile_command)


@click.command("profile")
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tokenizer", "tokenizer_path", required=True, type=click.Path(exists=True, path_type=Path),
              help="Folder holding tokenizer.json, or the file itself.")
@click.option("--strict", is_flag=True, help="Fail on the first malformed line instead of skipping it.")
@click.option("--page-size", type=click.IntRange(min=1), default=1, show_default=True,
              help="Server --page-size for the radix reuse replay.")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
def profile_command(log: Path, tokenizer_path: Path, strict: bool, page_size: int, as_json: bool) -> None:
    """Input/output length median and p95, prefix sharing rate, radix reuse, concurrency and request rate.

    LOG holds one JSON object per line with `prompt` (or `input`, or chat `messages`) and `completion`
    (or `output`, `response`), and optionally `timestamp`/`ts`/`start_time` with `end_time` or `latency`.
    """
    try:
        measured = profile_log(log, tokenizer_path, strict=strict, page_size=page_size)
    except (ProfileError, TokenizerNotFound) as err:
        raise click.ClickException(str(err)) from err
    for error in measured.errors:
        click.echo(f"skipped {error}", err=True)
    if measured.skipped_lines > len(measured.errors):
        click.echo(f"skipped {measured.skipped_lines - len(measured.errors)} more malformed lines", err=True)
    if as_json:
        click.echo(msgspec.json.encode(measured).decode())
    else:
        click.echo("\n".join(_text(measured)))


def _text(m: MeasuredProfile) -> list[str]:
    lines = [
        f"requests            : {m.requests} ({m.skipped_lines} lines skipped)",
        f"input median        : {m.input_median:g}",
        f"input p95           : {m.input_p95}",
        f"output median       : {m.output_median:g}",
        f"output p95          : {m.output_p95}",
        f"prefix sharing rate : {m.prefix_sharing_rate:.3f}",
        f"radix reuse rate    : {m.radix_reuse_rate:.3f}",
    ]
    if m.peak_concurrency is not None:
        lines.append(f"peak concurrency    : {m.peak_concurrency}")
    if m.request_rate is not None and m.peak_request_rate is not None:
        lines.append(f"request rate        : {m.request_rate:.2f} req/s mean, {m.peak_request_rate:g} req/s peak")
    return lines
