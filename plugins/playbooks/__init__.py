"""Built-in playbooks (loaded through the `sglang_tuner` entry-point group): the files in `playbooks/`."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from service import hookimpl, load_playbook_dir


def playbook_folder() -> Path:
    """The project's `playbooks/` data folder."""
    return Path(str(files("playbooks")))


@hookimpl
def register_playbooks(register: Callable[[Any], None]) -> None:
    """Register every playbook file shipped in `playbooks/`."""
    for playbook in load_playbook_dir(playbook_folder()):
        register(playbook)
