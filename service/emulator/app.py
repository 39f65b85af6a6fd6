"""The emulated server's HTTP surface: SGLang's routes for one version (`srt/entrypoints/http_server.py`).

`/health` answers 503 until the startup warm-up request has finished, then 200 without generating (so a
dead scheduler still looks healthy there, as the fault needs); `/health_generate` runs a one-token request.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from service.emulator.args import ServerArgs
from service.emulator.compiles import GrammarCompiles
from service.emulator.engine import EmulatedEngine
from service.emulator.faults import CRASH_LINES, Fault
from service.emulator.generate import Generation, Responder, native_request, openai_request
from service.emulator.http import (
    BadRequest,
    Receive,
    Scope,
    Send,
    query_params,
    read_json,
    send_bytes,
    send_error,
    send_events,
    send_json,
    send_text,
)
from service.emulator.json_output import DEFAULT_FAILURE_RATE
from service.emulator.tokens import encode
from service.sglang import version_key
from service.simulator.memory import PROMPT_MARGIN

HEALTH_GENERATE_TIMEOUT_S = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT default
FLUSHED = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, "
           "the operation will not be performed.)\n")
WARMUP_PROMPT = "The capital city of France is"
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]


class EmulatorApp:
    """An ASGI application serving one emulated SGLang server."""

    def __init__(self, args: ServerArgs, engine: EmulatedEngine, *, fault: Fault | None,
                 log: Callable[[str], None], context_len: int, model_type: str, architectures: list[str],
                 json_failure_rate: float = DEFAULT_FAILURE_RATE) -> None:
        self.args = args
        self.engine = engine
        self.fault = fault
        self.log = log
        self.context_len = context_len
        self.model_type = model_type
        self.architectures = architectures
        self.version = version_key(args.version)
        self.ready = False
        self.requests_seen = 0
        self.started = time.time()
        self.tasks: list[asyncio.Task[None]] = []
        self.compiles = GrammarCompiles(args.get("grammar_backend"), engine.time_scale)
        self.responder = Responder(engine, args.served_model_name, args.version,
                                   cache_report=bool(args.get("enable_cache_report")),
                                   incremental=bool(args.get("incremental_streaming_output")),
                                   stream_interval=int(args.get("stream_interval", 1) or 1),
                                   json_failure_rate=json_failure_rate, seed=int(args.get("random_seed") or 0))
        self.routes: dict[str, Handler] = {
            "/health": self.health, "/health_generate": self.health_generate, "/get_model_info": self.model_info,
            "/get_server_info": self.server_info, "/v1/models": self.models, "/generate": self.generate,
            "/v1/completions": self.completions, "/v1/chat/completions": self.chat, "/flush_cache": self.flush_cache,
        }
        if self.version >= (0, 5, 9):
            self.routes |= {"/model_info": self.model_info, "/server_info": self.server_info}
        if self.version <= (0, 5, 20):
            self.routes["/get_load"] = self.get_load
        if args.get("enable_metrics"):
            self.routes["/metrics"] = self.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        handler = self.routes.get(scope["path"])
        if handler is None:
            await send_json(send, {"detail": "Not Found"}, 404)
            return
        try:
            await handler(scope, receive, send)
        except BadRequest as exc:
            await send_error(send, str(exc))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.tasks.append(asyncio.create_task(self.engine.run()))
                self.tasks.append(asyncio.create_task(self._warm_up()))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for task in self.tasks:
                    task.cancel()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _warm_up(self) -> None:
        """SGLang's own warm-up request (`_wait_and_warmup`), then the ready line."""
        if not self.args.get("skip_server_warmup"):
            live = self.engine.submit(encode(WARMUP_PROMPT), 8)
            while await live.updates.get() is not None:
                pass
        self.ready = True
        self.log("The server is fired up and ready to roll!")

    # -- status and info ------------------------------------------------------------------------------

    async def health(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /health`: 503 while starting, then 200."""
        await send_text(send, "", 200 if self.ready else 503)

    async def health_generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /health_generate`: 200 once a one-token request completes."""
        if not self.ready:
            await send_text(send, "", 503)
            return
        live = self.engine.submit([0], 1)
        try:
            async with asyncio.timeout(HEALTH_GENERATE_TIMEOUT_S * self.engine.time_scale):
                await self._drain(live.updates)
        except TimeoutError:
            await send_text(send, "", 503)
            return
        await send_text(send, "", 200)

    @staticmethod
    async def _drain(updates: asyncio.Queue[int | None]) -> None:
        while await updates.get() is not None:
            pass

    async def model_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /model_info` (and `/get_model_info`)."""
        info: dict[str, Any] = {"model_path": self.args.get("model_path"),
                                "tokenizer_path": self.args.get("tokenizer_path") or self.args.get("model_path"),
                                "is_generation": True, "preferred_sampling_params": None, "weight_version": "default"}
        if self.version >= (0, 5, 9):
            info |= {"served_model_name": self.args.served_model_name, "load_format": "auto",
                     "reasoning_parser": None, "tool_call_parser": None,
                     "disaggregation_mode": self.args.disaggregation_mode, "has_image_understanding": False,
                     "has_audio_understanding": False, "model_type": self.model_type,
                     "architectures": self.architectures}
        await send_json(send, info)

    async def server_info(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /server_info` (and `/get_server_info`): resolved arguments and scheduler state."""
        resolved = self.engine.resolved
        settings = {**self.args.values, "model_path": self.args.get("model_path"), "host": self.args.host,
                    "port": self.args.port, "served_model_name": self.args.served_model_name,
                    "tp_size": self.args.get("tp_size", 1), "dp_size": self.args.get("dp_size", 1),
                    "load_balance_method": self.args.get("load_balance_method", "auto"),
                    "disaggregation_mode": self.args.disaggregation_mode,
                    "chunked_prefill_size": resolved.chunked_prefill_size,
                    "max_prefill_tokens": resolved.max_prefill_tokens,
                    "max_running_requests": resolved.max_running_requests,
                    "mem_fraction_static": resolved.mem_fraction_static, "page_size": resolved.page_size}
        state: dict[str, Any] = {**settings, "last_gen_throughput": self.engine.metrics.gen_throughput,
                                 "effective_max_running_requests_per_dp": resolved.max_running_requests}
        if self.engine.metrics.spec_accept_length is not None:
            state["avg_spec_accept_length"] = self.engine.metrics.spec_accept_length
        await send_json(send, {**settings, "status": "ready" if self.ready else "starting",
                               "max_total_num_tokens": resolved.pool_tokens, "max_total_tokens": resolved.pool_tokens,
                               "max_req_input_len": self.max_req_input_len, "startup_time": self.started,
                               "internal_states": [state], "version": self.args.version, "frontend": "python"})

    async def models(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /v1/models`."""
        name = self.args.served_model_name
        await send_json(send, {"object": "list", "data": [
            {"id": name, "object": "model", "created": int(self.started), "owned_by": "sglang", "root": name,
             "parent": None, "max_model_len": self.context_len}]})

    async def get_load(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /get_load` (served up to 0.5.20)."""
        running, waiting = self.engine.queue_depth()
        if self.version < (0, 5, 9):
            await send_json(send, {"load": running + waiting})
            return
        await send_json(send, [{"dp_rank": 0, "num_reqs": running + waiting, "num_waiting_reqs": waiting,
                                "num_tokens": self.engine.worker.used_tokens, "num_pending_tokens": 0,
                                "ts_tic": time.time()}])

    async def metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /metrics` (with `--enable-metrics`)."""
        body = self.engine.metrics.render().encode()
        await send_bytes(send, 200, body, "text/plain; version=0.0.4; charset=utf-8")

    async def flush_cache(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET|POST /flush_cache[?timeout=s]`: refused (400) while requests are running or waiting."""
        deadline = time.monotonic() + float(query_params(scope).get("timeout") or 0.0)
        while not self.engine.flush_cache():
            if time.monotonic() >= deadline:
                await send_text(send, "Flush cache failed.\n", 400)
                return
            await asyncio.sleep(0.05)
        await send_text(send, FLUSHED)

    # -- generation -----------------------------------------------------------------------------------

    def _admit(self, gen: Generation) -> Any:
        self.requests_seen += 1
        if self.fault is not None and self.requests_seen == self.fault.n:
            if self.fault.kind == "crash":
                for line in CRASH_LINES:
                    self.log(line)
                asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), 9)
            elif self.fault.kind == "dead_scheduler":
                self.engine.stalled = True
        return self.engine.submit(gen.prompt_ids, gen.max_new_tokens)

    def _refusal(self, gen: Generation) -> str | None:
        """SGLang's refusal of a request longer than the context (`tokenizer_manager.py` _validate_one_request),
        or of a constrained one on a server without a grammar backend (`grammar_manager.py`)."""
        if gen.constrained and self.args.get("grammar_backend") == "none":
            return ("Grammar-based generation (json_schema, regex, ebnf, structural_tag) is not supported when the "
                    "server is launched with --grammar-backend none")
        prompt = len(gen.prompt_ids)
        if prompt >= self.context_len:
            return f"The input ({prompt} tokens) is longer than the model's context length ({self.context_len} tokens)."
        if prompt + gen.max_new_tokens > self.context_len:
            return (f"Requested token count exceeds the model's maximum context length of {self.context_len} tokens. "
                    f"You requested a total of {prompt + gen.max_new_tokens} tokens: {prompt} tokens from the input "
                    f"messages and {gen.max_new_tokens} tokens for the completion. Please reduce the number of tokens "
                    "in the input messages or the completion to fit within the limit.")
        if prompt >= self.max_req_input_len:  # the scheduler's check (`managers/utils.py` validate_input_length)
            return (f"Input length ({prompt} tokens) exceeds the maximum allowed length ({self.max_req_input_len} "
                    "tokens). Use a shorter input or enable --allow-auto-truncate.")
        return None

    @property
    def max_req_input_len(self) -> int:
        """SGLang's `max_req_len - 5` (`tp_worker.py`), from the bound the engine's scheduler applies."""
        return self.engine.worker.setup.max_req_len - PROMPT_MARGIN

    async def _refuse(self, send: Send, gen: Generation, message: str, openai: bool) -> None:
        if not gen.stream:
            await send_error(send, message)
            return
        error = ({"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
                 if openai else {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False})

        async def events() -> Any:
            yield {"error": error}

        await send_events(send, events())

    async def generate(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST /generate`, streamed or not."""
        gen = native_request(await read_json(receive))
        if (refusal := self._refusal(gen)) is not None:
            await self._refuse(send, gen, refusal, openai=False)
            return
        if gen.constrained and gen.schema is not None:
            await self.compiles.wait(gen.schema)
        live = self._admit(gen)
        if gen.stream:
            await send_events(send, self.responder.native_stream(gen, live))
        else:
            await send_json(send, await self.responder.native_once(gen, live))

    async def completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST /v1/completions`."""
        await self._openai(receive, send, chat=False)

    async def chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST /v1/chat/completions`."""
        await self._openai(receive, send, chat=True)

    async def _openai(self, receive: Receive, send: Send, chat: bool) -> None:
        default_usage = bool(self.args.get("stream_response_default_include_usage"))
        gen = openai_request(await read_json(receive), chat, default_usage)
        if (refusal := self._refusal(gen)) is not None:
            await self._refuse(send, gen, refusal, openai=True)
            return
        if gen.constrained and gen.schema is not None:
            await self.compiles.wait(gen.schema)
        live = self._admit(gen)
        if gen.stream:
            await send_events(send, self.responder.openai_stream(gen, live, chat))
        else:
            await send_json(send, await self.responder.openai_once(gen, live, chat))
