"""Built-in runners (loaded through the `sglang_tuner` entry-point group)."""
