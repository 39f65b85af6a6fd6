"""Benchmarks: each module runs as `python -m bench.<name>` and prints one JSON line of results.

Figures and the machine they were measured on are recorded in BENCHMARKS.md.
"""
