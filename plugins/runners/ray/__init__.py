"""The `ray` runner: deployments placed on a Ray cluster, one placement group per round.

Importing this package does not import ray; a round does, and fails naming `pip install
'sglang-tuner[ray]'` when it is missing. See docs/runners.md, "The `ray` runner".
"""

from plugins.runners.ray.runner import RayRunner

__all__ = ["RayRunner"]
