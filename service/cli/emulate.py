"""`sglang-tuner emulate --model-path ... [sglang.launch_server flags]`: serve SGLang's API without a GPU."""

from __future__ import annotations

import sys

import click

from service.emulator import run_emulator


def register(main: click.Group) -> None:
    """Add the `emulate` command to the CLI."""
    main.add_command(emulate_command)


@click.command("emulate", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                            "help_option_names": []})
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def emulate_command(argv: tuple[str, ...]) -> None:
    """Run an emulated SGLang server taking `python -m sglang.launch_server` flags.

    Flags are checked against the emulated version's catalogue (SGLANG_TUNER_EMULATOR_VERSION, default 0.5.23)
    and refused as SGLang's argparse refuses them (exit code 2). Steps are timed by the simulator's engine
    model; SGLANG_TUNER_EMULATOR_TIME_SCALE, _GPU, _COST_MODEL and _FAULT tune it (see docs/runners.md).
    """
    sys.exit(run_emulator(list(argv)))
