"""The budget a chunked prompt's last chunk leaves admits the next waiting requests into the same batch."""

from __future__ import annotations

import msgspec
import numpy as np

from service.domain import resolve_model
from service.simulator.analytic import analytic_binder
from service.simulator.batch import Recorder
from service.simulator.memory import resolve_server
from service.simulator.radix import RadixCache
from service.simulator.requests import SimRequest
from service.simulator.worker import Worker, WorkerSetup

from .conftest import load

RAG = load("document-qa-rag-round0")


def _worker(finished: list[SimRequest]) -> Worker:
    model = resolve_model(RAG.model)
    server = msgspec.structs.replace(RAG.deployment.groups[0].server, chunked_prefill_size=8192)
    resolved = resolve_server(model, RAG.hardware, server)
    setup = WorkerSetup(index=0, role="unified", resolved=resolved,
                        cost=analytic_binder(model, RAG.hardware)(server), spec=None, mixed_chunk=False,
                        ignore_eos=True, step_factor=1.0, mask_seconds=0.0, host_link_bytes_per_s=64e9,
                        prefill_decode_interval=0)
    return Worker(setup, RadixCache(page_size=resolved.page_size), Recorder(), np.random.default_rng(0),
                  lambda r, now: finished.append(r))


def _request(rid: int, tokens: int) -> SimRequest:
    return SimRequest(rid=rid, blocks=((1_000_000 + rid, tokens),), input_len=tokens, output_len=4,
                      max_new_tokens=4)


def _step(worker: Worker, now: float) -> tuple[list[tuple[int, int]], float]:
    seconds = worker.start_step(now)
    assert seconds is not None and worker.plan is not None
    batch = [(r.rid, take) for r, take in worker.plan[1]]
    worker.finish_step(now + seconds)
    return batch, now + seconds


def test_a_question_behind_a_long_document_rides_along_with_its_last_chunk() -> None:
    finished: list[SimRequest] = []
    worker = _worker(finished)
    document, question, second = _request(1, 12_000), _request(2, 100), _request(3, 9_000)
    for r in (document, question, second):
        worker.enqueue(r)
    first, now = _step(worker, 0.0)
    assert first == [(1, 8192)]  # a truncated chunk spends the whole budget: nobody else joins
    last, now = _step(worker, now)
    # `scheduler.py` scans the waiting queue after add_chunked_req: the 4,384 tokens left admit the question
    # whole and start the next document's first chunk, page aligned.
    assert last[:2] == [(1, 12_000 - 8192), (2, 100)]
    assert last[2][0] == 3 and last[2][1] == 8192 - (12_000 - 8192) - 100
    assert document.first_token == question.first_token == now
    assert worker.chunked is second
