"""Built-in cost models (loaded through the `sglang_tuner` entry-point group)."""
