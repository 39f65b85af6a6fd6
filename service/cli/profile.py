"""`sglang-tuner profile LOG.jsonl --tokenizer DIR`: measure a workload profile from a request log.

`--trace-out FILE` also writes the log as a trace a scenario can replay; `--trace` profiles a trace instead.
"""

from __future__ import annotations

from pathlib import Path

import click
import msgspec

from service.domain import TRACE_BLOCK_TOKENS, MeasuredProfile
from service.profile import ProfileError, TokenizerNotFound, profile_log, profile_trace
from service.strict_toml import InputFileError


def register(main: click.Group) -> None:
    """Add the `profile` command to the CLI."""
    main.add_command(profile_command)


@click.command("profile")
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tokenizer", "tokenizer_path", type=click.Path(exists=True, path_type=Path),
              help="Folder holding tokenizer.json, or the file itself (needed for a request log).")
@click.option("--strict", is_flag=True, help="Fail on the first malformed line instead of skipping it.")
@click.option("--page-size", type=click.IntRange(min=1), default=1, show_default=True,
              help="Server --page-size for the radix reuse replay.")
@click.option("--trace-out", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Also write the log as a trace (Mooncake's JSON lines: times, lengths, block hash ids, no text) "
                   "for a scenario's bench.dataset = \"trace\".")
@click.option("--trace", "is_trace", is_flag=True,
              help="LOG is a trace in Mooncake's format: profile it, no tokenizer.")
@click.option("--block-tokens", type=click.IntRange(min=1), default=TRACE_BLOCK_TOKENS, show_default=True,
              help="Tokens per hash id of the trace written or read.")
@click.option("--chatml", is_flag=True,
              help="Render chat messages as ChatML even when the tokenizer folder has the model's chat template "
                   "(chat_template.jinja, or chat_template in tokenizer_config.json).")
@click.option("--json", "as_json", is_flag=True, help="Print the profile as JSON.")
def profile_command(log: Path, tokenizer_path: Path | None, strict: bool, page_size: int, trace_out: Path | None,
                    is_trace: bool, block_tokens: int, chatml: bool, as_json: bool) -> None:
    """Input/output length median and p95, prefix sharing rate, radix reuse, concurrency and request rate.

    LOG holds one JSON object per line with `prompt` (or `input`, or chat `messages`) and `completion`
    (or `output`, `response`), and optionally `timestamp`/`ts`/`start_time` with `end_time` or `latency`.
    Chat messages are rendered with the model's chat template when the tokenizer folder has one, else ChatML.
    With --trace, LOG is a trace instead: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
    """
    measured = _trace_profile(log, block_tokens) if is_trace else _log_profile(
        log, tokenizer_path, strict, page_size, trace_out, block_tokens, not chatml)
    for error in measured.errors:
        click.echo(f"skipped {error}", err=True)
    if measured.skipped_lines > len(measured.errors):
        click.echo(f"skipped {measured.skipped_lines - len(measured.errors)} more malformed lines", err=True)
    if trace_out is not None:
        click.echo(f"trace of {measured.requests} requests written to {trace_out}", err=True)
    if as_json:
        click.echo(msgspec.json.encode(measured).decode())
    else:
        click.echo("\n".join(_text(measured)))


def _log_profile(log: Path, tokenizer_path: Path | None, strict: bool, page_size: int, trace_out: Path | None,
                 block_tokens: int, chat_template: bool) -> MeasuredProfile:
    if tokenizer_path is None:
        raise click.UsageError("a request log needs --tokenizer (the model's tokenizer.json); pass --trace if LOG is "
                               "a trace")
    try:
        return profile_log(log, tokenizer_path, strict=strict, page_size=page_size, trace_out=trace_out,
                           block_tokens=block_tokens, chat_template=chat_template)
    except (ProfileError, TokenizerNotFound) as err:
        raise click.ClickException(str(err)) from err


def _trace_profile(log: Path, block_tokens: int) -> MeasuredProfile:
    try:
        return profile_trace(log, block_tokens)
    except InputFileError as err:
        raise click.ClickException(str(err)) from err


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
