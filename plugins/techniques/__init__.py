"""Built-in techniques (loaded through the `sglang_tuner` entry-point group)."""
