"""Grammar compiles of one emulated server: a request with a schema waits for its grammar before it is queued.

What SGLang 0.5.23 does (`srt/constrained/`, `service/simulator/grammar.py` has the whole account): a schema
already in the backend's cache costs nothing; otherwise the request waits in the grammar queue while its
schema compiles. xgrammar's compiler shares a compile already running for the same schema; llguidance and
outlines compile again for every request that arrives before the first compile is done. A compile takes the
simulator's time for that schema (`solo_compile_seconds`: the casebook's 40-400 ms for xgrammar, about
2 ms for llguidance, a minute and more for outlines), on the emulator's clock. Not emulated: compiles
slowing each other down on the host's cores, and the ranks of a TP group each compiling.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from typing import Any

import msgspec

from service.simulator.grammar import SHARES_INFLIGHT_COMPILE, solo_compile_seconds

# The load generator titles its schemas `schema-<id>` (`service/loadgen/schemas.py`): the id fixes how long
# the schema compiles, as in the simulator; any other schema is timed by a hash of its text.
_TITLE = re.compile(r"schema-(\d+)$")


def schema_key(schema: dict[str, Any]) -> tuple[str, int]:
    """The cache key of a schema (its canonical JSON) and the id its compile time is drawn for."""
    text = msgspec.json.encode(schema, order="sorted").decode()
    title = schema.get("title")
    found = _TITLE.match(title) if isinstance(title, str) else None
    return text, int(found.group(1)) if found else zlib.crc32(text.encode())


class GrammarCompiles:
    """The grammar cache of one server and the compiles running for it."""

    def __init__(self, backend: str | None, time_scale: float) -> None:
        self.backend = backend or "xgrammar"  # SGLang's default backend
        self.time_scale = max(time_scale, 1e-6)
        self.ready: set[str] = set()
        self.running: dict[str, asyncio.Future[None]] = {}
        self.compiled = 0

    async def wait(self, schema: dict[str, Any]) -> None:
        """Return once `schema`'s grammar is ready for this request."""
        key, schema_id = schema_key(schema)
        if key in self.ready:
            return
        if self.backend in SHARES_INFLIGHT_COMPILE and key in self.running:
            await asyncio.shield(self.running[key])
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.running.setdefault(key, future)
        try:
            await asyncio.sleep(solo_compile_seconds(self.backend, schema_id) * self.time_scale)
        finally:
            self.ready.add(key)
            self.compiled += 1
            if self.running.get(key) is future:
                del self.running[key]
            future.set_result(None)
