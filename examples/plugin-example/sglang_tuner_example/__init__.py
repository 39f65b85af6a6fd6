"""Hook implementations only: this package registers one technique and one playbook that uses it."""

from importlib.resources import files
from pathlib import Path

from service import hookimpl, load_playbook

from sglang_tuner_example.technique import CudaGraphBatchTechnique


def playbook_folder() -> Path:
    """The installed package's `playbooks/` folder (package data, so it travels in the wheel)."""
    return Path(str(files("sglang_tuner_example"))) / "playbooks"


@hookimpl
def register_techniques(register):
    register(CudaGraphBatchTechnique())


@hookimpl
def register_playbooks(register):
    register(load_playbook(playbook_folder() / "high-concurrency-decode.toml"))
