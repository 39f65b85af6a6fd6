"""Built-in playbooks (loaded through the `sglang_tuner` entry-point group)."""
