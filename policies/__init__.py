"""Built-in decision policies (loaded through the `sglang_tuner` entry-point group)."""
