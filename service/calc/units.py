"""The casebook's units, pinned down once.

The casebook writes "KV per token (BF16) = 196,608 bytes ≈ 192 KB", so its KB is 1,024 bytes (KiB). Its GB
in the KV arithmetic is 10^6 of those KB ("3,000 × 192 KB × 25 ≈ 14.4 GB", "20,000 × 96 KB = 1.92 GB") and
its MB is 10^3 KB ("64 × 96 KB = 6.1 MB"). Every calculator in `service.calc` reads and prints memory in
these units, and bandwidth in those GB per second ("1.92 GB ÷ 64 GB/s ≈ 30 ms"), so the casebook's figures
come out exactly as it prints them. Datasheet HBM sizes (80 GB, 141 GB) and model-card weight sizes
(27B parameters at FP8 = 27 GB) are taken at face value in the same GB, as the casebook does when it
subtracts 27 GB of weights from 320 GB of HBM.
"""

from __future__ import annotations

KB: int = 1024
"""Bytes in the casebook's KB (a KiB)."""

MB: int = 1_000 * KB
"""Bytes in the casebook's MB: 10^3 KB."""

GB: int = 1_000_000 * KB
"""Bytes in the casebook's GB: 10^6 KB = 1.024e9 bytes."""

SECONDS_PER_HOUR: int = 3_600


def bytes_to_gb(num_bytes: float) -> float:
    """Convert bytes to the casebook's GB (10^6 KiB)."""
    return num_bytes / GB


def gb_to_bytes(gigabytes: float) -> float:
    """Convert the casebook's GB (10^6 KiB) to bytes."""
    return gigabytes * GB
