"""One SGLang server instance: waiting queue, prefill admission, running batch, retraction, steps.

Follows `srt/managers/scheduler.py` get_next_batch_to_run: a prefill batch runs whenever the PrefillAdder
(`schedule_policy.py`) admits anything, otherwise the running batch decodes. Without
`--enable-mixed-chunk` a step is a prefill OR a decode, so decoding requests wait through every prefill
step, including every chunk of a long prompt (`--prefill-decode-interval` is the 0.5.23 knob that runs
decode rounds in between). KV accounting: `own` tokens belong to running requests; the radix tree holds
the rest, locked while a running request uses it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from service.components import StepCostModel
from service.simulator.batch import Recorder, RunningBatch
from service.simulator.memory import PROMPT_MARGIN, ResolvedServer
from service.simulator.radix import RadixCache
from service.simulator.requests import SimRequest
from service.simulator.speculative import SpeculativeSettings, sample_accepts

# `schedule_policy.py` CLIP_MAX_NEW_TOKENS and `environ.py` SGLANG_* defaults (0.5.23).
CLIP_MAX_NEW_TOKENS = 4096
INIT_NEW_TOKEN_RATIO, MIN_NEW_TOKEN_RATIO_FACTOR, NEW_TOKEN_RATIO_DECAY_STEPS = 0.7, 0.14, 600
RETRACT_DECODE_STEPS = 20
# Share of a write-through host copy that is not hidden behind compute (kernel io backend uses SMs).
WRITE_THROUGH_VISIBLE = 0.1


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """Static description of a worker."""

    index: int
    role: str
    resolved: ResolvedServer
    cost: StepCostModel
    spec: SpeculativeSettings | None
    mixed_chunk: bool
    ignore_eos: bool
    step_factor: float
    mask_seconds: float
    host_link_bytes_per_s: float
    prefill_decode_interval: int
    # The factor for a step the cost model answered analytically (its fallback): a fallback step carries no
    # measured routing skew, so it takes the whole imbalance, not the part relative to the measured rows.
    fallback_step_factor: float | None = None
    # SGLang's `max_req_len`: min(context length, KV pool) - 1 (`managers/tp_worker.py`); 0 leaves requests as drawn.
    max_req_len: int = 0


class Worker:
    """Scheduler state of one server instance."""

    def __init__(self, setup: WorkerSetup, cache: RadixCache, recorder: Recorder, rng: np.random.Generator,
                 on_finish: Callable[[SimRequest, float], None]) -> None:
        self.setup = setup
        self.res = setup.resolved
        self.cache = cache
        self.rec = recorder
        self.rng = rng
        self.on_finish = on_finish
        self.waiting: deque[SimRequest] = deque()
        self.chunked: SimRequest | None = None
        self.running = RunningBatch(min(self.res.max_running_requests, 16384))
        self.own = 0
        self.busy = False
        self.step_started = 0.0
        self.plan: tuple[str, list[tuple[SimRequest, int]], bool] | None = None
        self.last_decode_end = 0.0
        self.defer_left = 0
        self.transferring: list[SimRequest] = []
        init = min(INIT_NEW_TOKEN_RATIO * self.res.schedule_conservativeness, 1.0)
        self.ratio_init, self.ratio_min = init, min(init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.ratio_decay = (init - self.ratio_min) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.ratio = init
        self.steps = 0
        self.host_written_seen = 0
        self.loading_tokens = 0  # host-tier KV the next prefill must bring back to the device first
        self.accept_cdf = setup.spec.accept_cdf() if setup.spec else None

    # -- memory ---------------------------------------------------------------------------------------

    @property
    def available(self) -> int:
        return self.res.pool_tokens - self.cache.device_tokens - self.own

    @property
    def used_tokens(self) -> int:
        """Tokens not free and not evictable, as `sglang:token_usage` counts them."""
        return self.own + self.cache.protected_tokens

    def _make_room(self, tokens: int, now: float) -> bool:
        if self.available < tokens:
            self.cache.evict(tokens - self.available, now)
        return self.available >= tokens

    # -- queue ----------------------------------------------------------------------------------------

    def refusal(self, req: SimRequest) -> str | None:
        """Why this server refuses `req` at its door, else None after bounding its output as SGLang does.

        A prompt of `max_req_len - 5` tokens or more is refused (`validate_input_length`, no auto-truncate);
        a shorter one has `max_new_tokens` cut to `max_req_len - input - 1` (`init_req_max_new_tokens`), so a
        request always fits an empty pool and none waits forever for room it can never have.
        """
        limit = self.setup.max_req_len
        if limit <= 0:
            return None
        if req.input_len >= limit - PROMPT_MARGIN:
            pool = self.res.rank_pool_tokens
            holder = ("decode " if self.setup.role == "decode" else "") + (
                "DP-attention rank" if self.res.attention_dp > 1 else "instance")
            bound = (f"KV pool of {pool:,} tokens per {holder}" if limit >= pool - 1
                     else f"context length of {limit + 1:,} tokens")
            return f"refused: prompt longer than the {limit - PROMPT_MARGIN:,} tokens SGLang admits ({bound})"
        req.max_new_tokens = min(req.max_new_tokens, limit - req.input_len - 1)
        if req.output_len > req.max_new_tokens:
            req.output_cut, req.output_len = req.output_len - req.max_new_tokens, req.max_new_tokens
        return None

    def enqueue(self, req: SimRequest, front: bool = False) -> None:
        if self.setup.role != "decode":
            req.worker = self.setup.index
        (self.waiting.appendleft if front else self.waiting.append)(req)

    @property
    def load(self) -> int:
        """Requests this worker holds (what a router counts as in-flight)."""
        return len(self.waiting) + self.running.size + (1 if self.chunked else 0) + len(self.transferring)

    # -- planning -------------------------------------------------------------------------------------

    def start_step(self, now: float) -> float | None:
        """Choose the next batch; returns its duration, or None when there is nothing to run."""
        batch: list[tuple[SimRequest, int]] = []
        fallbacks = self.setup.cost.fallback_steps()
        if self.defer_left and self.running.size:
            self.defer_left -= 1
        else:
            self.defer_left = 0
            batch = self._admit(now)
        if batch:
            mixed = self.setup.mixed_chunk and self.running.size > 0 and (
                self.setup.spec is None or self.setup.spec.mixes_chunks)
            seconds = self._prefill_seconds(batch, mixed)
            self.plan = ("prefill", batch, mixed)
            self.defer_left = self.setup.prefill_decode_interval
        elif self.running.size and self._ensure_decode_memory(now):
            seconds = self._decode_seconds()
            self.plan = ("decode", [], True)
        else:
            self.plan = None
            return None
        factor = self.setup.step_factor
        if self.setup.fallback_step_factor is not None and self.setup.cost.fallback_steps() > fallbacks:
            factor = self.setup.fallback_step_factor
        seconds = seconds * factor + self._host_copy_seconds()
        self.busy = True
        self.steps += 1
        return max(seconds, 1e-6)

    def _prefill_seconds(self, batch: list[tuple[SimRequest, int]], mixed: bool) -> float:
        new = sum(take for _, take in batch)
        cached = sum(r.prefix_len + r.extended for r, _ in batch)
        n = len(batch)
        if mixed:
            new, cached, n = new + self.running.size, cached + self.running.ctx_sum, n + self.running.size
        dp = self.res.attention_dp
        seconds = self.setup.cost.prefill_seconds(-(-new // dp), cached // dp, -(-n // dp))
        if self.setup.spec is not None:
            seconds *= 1 + self.setup.spec.draft_share  # the draft model prefills the prompt too
        if self.loading_tokens:
            # `mem_cache/hiradix_cache.py` load_back: host hits are copied to the device before the extend;
            # the copy runs layer by layer under the forward (io backend kernel), so the step is the longer.
            nbytes = self.loading_tokens * self.res.kv_bytes_per_gpu_token
            seconds = max(seconds, self.setup.cost.transfer_seconds(nbytes, self.setup.host_link_bytes_per_s / 1e9))
            self.loading_tokens = 0
        return seconds + (self.running.size * self.setup.mask_seconds if mixed else 0.0)

    def _decode_seconds(self) -> float:
        # Under DP attention every rank schedules its own share and all ranks step together
        # (`managers/data_parallel_controller.py`); cost models price one rank's batch, so the running
        # requests are spread evenly over the ranks.
        dp = self.res.attention_dp
        b, ctx = -(-self.running.size // dp), self.running.ctx_sum // dp
        spec = self.setup.spec
        if spec is None:
            return self.setup.cost.decode_seconds(b, ctx) + b * self.setup.mask_seconds
        # `speculative/eagle_worker.py`: `steps` draft passes over batch x topk tokens, then a TARGET_VERIFY
        # forward of batch x num_draft_tokens tokens that reads each request's KV once; the cost model prices
        # it, so it turns compute-bound near threshold_batch / num_draft_tokens requests.
        round_seconds = self.setup.cost.speculative_step_seconds(b, ctx, spec.draft_tokens, spec.steps, spec.topk)
        return round_seconds + b * self.setup.mask_seconds

    def _host_copy_seconds(self) -> float:
        written = self.cache.host_written_tokens - self.host_written_seen
        self.host_written_seen = self.cache.host_written_tokens
        if not written:
            return 0.0
        seconds = written * self.res.kv_bytes_per_gpu_token / self.setup.host_link_bytes_per_s
        return seconds if self.cache.write_back else seconds * WRITE_THROUGH_VISIBLE

    # -- admission (PrefillAdder) ---------------------------------------------------------------------

    def _admit(self, now: float) -> list[tuple[SimRequest, int]]:
        if self.setup.role == "decode":
            self._admit_transferred(now)
            return []
        if self.chunked is None and not self.waiting:
            return []
        ratio = 1.0 if self.setup.ignore_eos else self.ratio
        rem_total = self.available + self.cache.evictable_tokens - self.running.reserved_tokens(
            CLIP_MAX_NEW_TOKENS, ratio)
        dp = self.res.attention_dp  # each DP-attention rank has its own prefill budget
        rem_chunk = None if self.res.chunked_prefill_size is None else self.res.chunked_prefill_size * dp
        mixes = self.setup.mixed_chunk and (self.setup.spec is None or self.setup.spec.mixes_chunks)
        rem_input = self.res.max_prefill_tokens * dp - (self.running.size if mixes else 0)
        batch: list[tuple[SimRequest, int]] = []
        # `scheduler.py` get_new_batch_prefill: the waiting queue is scanned after add_chunked_req, so the
        # budget a chunked request's last chunk leaves admits the next requests into the same batch.
        carried = self.chunked
        open_ = carried is None
        if carried is not None:
            r = carried
            chunk = r.remaining_prefill if rem_chunk is None else min(r.remaining_prefill, rem_chunk)
            if not self._make_room(chunk, now):
                return []
            self.own += chunk
            batch.append((r, chunk))
            rem_total -= chunk
            rem_input -= chunk
            if rem_chunk is not None:
                rem_chunk -= chunk
            open_ = chunk == r.remaining_prefill
            if open_:  # a finishing chunk reserves its decode tokens (`_update_prefill_budget`)
                rem_total -= min(r.max_new_tokens - r.generated, CLIP_MAX_NEW_TOKENS)
        while self.waiting and open_ and self.chunked is carried and rem_input > 0 \
                and (rem_chunk is None or rem_chunk > 0):
            if self.running.size + len(batch) >= self.running.capacity:
                break
            take = self._try_add(self.waiting[0], now, rem_total, rem_chunk, rem_input, bool(batch))
            if take is None:
                break
            r = self.waiting.popleft()
            batch.append((r, take))
            reserve = min(r.max_new_tokens - r.generated, CLIP_MAX_NEW_TOKENS)
            rem_total -= take + reserve
            rem_input -= take
            if rem_chunk is not None:
                rem_chunk -= take
        return batch

    def _try_add(self, r: SimRequest, now: float, rem_total: float, rem_chunk: int | None, rem_input: int,
                 nonempty: bool) -> int | None:
        """`add_one_req`: the tokens to prefill now, or None to stop admitting."""
        match = self.cache.match(r.blocks, now)
        prefix = match.device_tokens + match.host_tokens
        extend = r.input_len + r.generated - prefix
        reserve = min(r.max_new_tokens - r.generated, CLIP_MAX_NEW_TOKENS)
        if extend + reserve >= rem_total:
            return None
        if rem_chunk is None or extend <= rem_chunk:
            if extend > rem_input and nonempty:
                return None
            take = extend
        else:
            take = rem_chunk // self.res.page_size * self.res.page_size
            if take <= 0:
                return None
        self.cache.lock(match.node)
        if not self._make_room(take + match.host_tokens, now):
            self.cache.unlock(match.node, now)
            return None
        if match.host_tokens:
            self.loading_tokens += self.cache.load_back(match, now)
        self.own += take
        r.lock, r.prefix_len, r.extended = match.node, prefix, 0
        if r.first_token < 0:
            r.cached_tokens, r.host_hit_tokens = prefix, match.host_tokens
        if take < extend:
            self.chunked = r
        return take

    def _admit_transferred(self, now: float) -> None:
        """PD decode: a request whose KV arrived joins the running batch when its pages fit."""
        while self.waiting and self.running.size < self.running.capacity:
            r = self.waiting[0]
            need = r.input_len + r.generated + min(r.max_new_tokens - r.generated, CLIP_MAX_NEW_TOKENS) * (
                1.0 if self.setup.ignore_eos else self.ratio)
            if need > self.available + self.cache.evictable_tokens - self.running.reserved_tokens(
                    CLIP_MAX_NEW_TOKENS, 1.0 if self.setup.ignore_eos else self.ratio):
                return
            if not self._make_room(r.input_len + r.generated, now):
                return
            self.waiting.popleft()
            self.own += r.input_len + r.generated
            r.lock = self.cache.root
            self._emit_first_token(r, now)
            self.running.add(r)

    # -- retraction -----------------------------------------------------------------------------------

    def _ensure_decode_memory(self, now: float) -> bool:
        """`check_decode_mem`, retracting requests when the pool cannot hold the next step's tokens."""
        per_req = self.setup.spec.draft_tokens if self.setup.spec else 1
        if self._make_room(self.running.size * per_req, now):
            return True
        retracted = 0
        order = sorted((r for r in self.running.reqs if r is not None),
                       key=lambda r: (self.running.generated(r.slot), -r.input_len), reverse=True)
        while order and not self._make_room(len(order) * RETRACT_DECODE_STEPS, now):
            if len(order) == 1:
                break
            self._retract(order.pop(), now)
            retracted += 1
        if retracted:
            self.rec.retractions += retracted if self.rec.measuring else 0
            self.ratio = self._ratio_after_retract()
        if not self._make_room(self.running.size * per_req, now):
            for r in order:
                self._release(r, now)
                r.aborted, r.failure = True, "aborted: KV cache pool exhausted"
                self.on_finish(r, now)
            return False
        return True

    def _ratio_after_retract(self) -> float:
        idx = self.running.indices()
        decoded = float(self.running.gen[idx].sum())
        max_new = float(self.running.max_new[idx].sum())
        return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(idx)) / (max_new + 1))

    def _retract(self, r: SimRequest, now: float) -> None:
        self._release(r, now)
        r.prefix_len = r.extended = 0
        r.retracted += 1
        self.waiting.appendleft(r)

    def _release(self, r: SimRequest, now: float) -> None:
        self.running.remove(r)
        self.own -= r.generated if self.cache.enabled and self.setup.role != "decode" else r.input_len + r.generated
        if r.lock is not None:
            self.cache.unlock(r.lock, now)
            r.lock = None

    # -- completion -----------------------------------------------------------------------------------

    def finish_step(self, now: float) -> list[SimRequest]:
        """Apply the finished step; returns requests that leave this worker for a decode worker (PD)."""
        plan, self.plan = self.plan, None
        if plan is None:
            self.busy = False
            return []
        kind, batch, mixed = plan
        self.rec.steps += 1 if self.rec.measuring else 0
        if kind == "decode" or mixed:
            # Under speculation a mixed step decodes its running requests plainly: one token each, no draft.
            self._advance_decode(now, plain=kind == "prefill")
        leaving = [r for r, take in batch if self._finish_prefill(r, take, now)]
        if not self.running.size:
            self.ratio = self.ratio_init
        self.busy = False  # only now: finishing callbacks must not re-plan a step mid-way (re-entrancy)
        return leaving

    def _finish_prefill(self, r: SimRequest, take: int, now: float) -> bool:
        r.extended += take
        if r.remaining_prefill > 0:
            return False
        if self.chunked is r:
            self.chunked = None
        if self.rec.measuring and not r.warmup and r.first_token < 0:
            self.rec.input_tokens += r.input_len
            self.rec.cached_tokens += r.cached_tokens
            self.rec.host_tokens += r.host_hit_tokens
        old_lock = r.lock
        if self.cache.enabled:
            node, _ = self.cache.insert(r.blocks, now)
            self.own -= r.input_len - r.prefix_len
            self.cache.lock(node)
            if old_lock is not None:
                self.cache.unlock(old_lock, now)
            r.lock = node
        if self.setup.role == "prefill":
            self.transferring.append(r)
            return True
        self._emit_first_token(r, now)
        if r.generated >= r.output_len:
            self._complete(r, now, running=False)
        else:
            self.running.add(r)
        return False

    def _emit_first_token(self, r: SimRequest, now: float) -> None:
        if r.first_token < 0:
            r.first_token = now
        elif not r.warmup:
            self.rec.itl(now - r.last_token, 1)  # a retracted request's recomputed prefill emits its next token
        r.generated += 1
        r.last_token = now
        self.own += 1

    def release_transfer(self, r: SimRequest, now: float) -> None:
        """PD prefill: the KV reached the decode worker, so this worker's copy is released."""
        self.transferring.remove(r)
        if self.cache.enabled:
            if r.lock is not None:
                self.cache.unlock(r.lock, now)
        else:
            self.own -= r.input_len + r.generated - r.prefix_len
        r.lock, r.prefix_len, r.extended = None, 0, 0

    def _advance_decode(self, now: float, plain: bool = False) -> None:
        spec = self.setup.spec
        if spec is None:
            self._advance_uniform(now)
            return
        idx = self.running.indices()
        if not len(idx):
            return
        n = len(idx)
        cdf = None if plain else self.accept_cdf
        drafted = cdf is not None
        emitted = sample_accepts(cdf, n, self.rng) if cdf is not None else np.ones(n, dtype=np.int64)
        emitted = np.maximum(np.minimum(emitted, self.running.target[idx] - self.running.gen[idx]), 1)
        self._record_itl(idx, emitted, now)
        if drafted and self.rec.measuring:
            self.rec.spec_steps += n
            self.rec.spec_emitted += int(emitted.sum())
            self.rec.spec_proposed += n * (spec.max_accept - 1)
        before = self.running.ctx_sum
        done = self.running.advance(emitted)
        self.own += self.running.ctx_sum - before
        self.ratio = max(self.ratio - self.ratio_decay, self.ratio_min)
        self.last_decode_end = now
        for slot in done:
            r = self.running.reqs[int(slot)]
            assert r is not None
            self._complete(r, now, running=True)

    def _advance_uniform(self, now: float) -> None:
        """A plain decode step: one token per running request (the batch's bookkeeping is O(finished))."""
        n = self.running.size
        if not n:
            return
        fresh = 0
        if self.running.fresh_count:
            idx = self.running.indices()
            for slot in idx[self.running.fresh[idx]]:
                r = self.running.reqs[int(slot)]
                assert r is not None
                self.rec.itl(now - r.last_token, 1)
                fresh += 1
            self.running.clear_fresh(idx)
        self.rec.itl_group(now - self.last_decode_end, n - fresh)
        done = self.running.advance_one()
        self.own += n
        self.ratio = max(self.ratio - self.ratio_decay, self.ratio_min)
        self.last_decode_end = now
        for slot in done:
            r = self.running.reqs[slot]
            assert r is not None
            self._complete(r, now, running=True)

    def _record_itl(self, idx: np.ndarray, emitted: np.ndarray, now: float) -> None:
        fresh = self.running.fresh[idx]
        if fresh.any():
            for k in np.flatnonzero(fresh):
                r = self.running.reqs[int(idx[k])]
                assert r is not None
                a = int(emitted[k])
                self.rec.itl((now - r.last_token) / a, a)
            self.running.clear_fresh(idx)
            emitted = emitted[~fresh]
        if self.setup.spec is None:
            self.rec.itl_group(now - self.last_decode_end, len(emitted))
        else:
            self.rec.itl_group(now - self.last_decode_end, emitted)

    def _complete(self, r: SimRequest, now: float, running: bool) -> None:
        if running:
            self.running.remove(r)
        r.last_token = now
        if self.cache.enabled and self.setup.role != "decode":
            node = r.lock
            self.own -= r.generated
            if node is not None:
                self.cache.insert_output(node, r.generated, now)
                self.cache.unlock(node, now)
        else:
            self.own -= r.input_len + r.generated - (r.prefix_len if self.setup.role != "decode" else 0)
        r.lock = None
        r.finish = now
        self.on_finish(r, now)
