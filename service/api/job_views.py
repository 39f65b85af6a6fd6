"""An in-memory index of job views for `GET /v1/jobs/{id}`, the route dashboards and agents poll.

A job view read on the request path costs a database read and several thread hops through aiosqlite, and
every hop waits its turn on the event loop behind the other requests in flight: with many clients polling
running jobs, those waits made the slowest requests (`bench/api.py`, BENCHMARKS.md "API"). So requests are
answered from this index, and the database is read off the request path: a background task refreshes the
views of queued and running jobs clients have asked for within `max_stale_seconds` every `refresh_seconds`,
with one query for all running jobs (a job nobody polls is dropped and read again when asked for). Views of
finished jobs never change (a finished job is immutable) and are kept. A view is read on the request path
only the first time a job is asked for, or when the refresher has fallen `max_stale_seconds` behind (then
concurrent requests for one job share a single read). The API's own writes (create, cancel) replace the
entry at once; a long-poll (`?wait=`) always reads the database.

Pages of `GET /v1/jobs` are kept the same way, for `refresh_seconds` each (so a listing is as stale as a
view may be): clients polling a dashboard ask for the same page, and each page read costs a database
read of 50 rows. A page in use is read again in the background once half that old, so requests do not
wait for it; concurrent requests for a page nobody asked for lately share one read. The API's own writes
(create, cancel) drop every page.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable

from service.api.wire import JobList, JobView, job_view
from service.domain import JobState
from service.logs import get_logger
from service.store import JobRecord, Store

log = get_logger(__name__)

CAPACITY = 10_000
# A page of the running-jobs listing; running jobs are bounded by the worker slots of every instance.
_RUNNING_PAGE = 200


class JobViewIndex:
    """Job views by id: finished ones until evicted, queued and running ones refreshed in the background."""

    def __init__(self, refresh_seconds: float, *, max_stale_seconds: float | None = None) -> None:
        self.refresh_seconds = refresh_seconds
        # With no refresher (refresh_seconds 0) every read of a live job goes to the database.
        self.max_stale_seconds = max(refresh_seconds * 10, 5.0) if max_stale_seconds is None else max_stale_seconds
        self._entries: dict[str, tuple[float, JobView]] = {}
        self._reads: dict[str, asyncio.Future[JobView | None]] = {}
        self._asked: dict[str, float] = {}  # when each job's view was last asked for
        self._pages: dict[Hashable, tuple[float, JobList]] = {}
        self._page_reads: dict[Hashable, asyncio.Task[JobList]] = {}

    async def page(self, key: Hashable, read: Callable[[], Awaitable[JobList]]) -> JobList:
        """The listing page `key` read at most `refresh_seconds` ago, else `read()` (shared by concurrent callers)."""
        if self.refresh_seconds <= 0:
            return await read()
        hit = self._pages.get(key)
        if hit is not None:
            age = time.monotonic() - hit[0]
            if age < self.refresh_seconds:
                if age >= self.refresh_seconds / 2:
                    self._page_read(key, read)  # ahead of expiry: this request does not wait for it
                return hit[1]
        # Shielded: one client giving up must not cancel the read the others wait for.
        return await asyncio.shield(self._page_read(key, read))

    def _page_read(self, key: Hashable, read: Callable[[], Awaitable[JobList]]) -> asyncio.Task[JobList]:
        """The read of this page in flight, or a new one."""
        pending = self._page_reads.get(key)
        if pending is None:
            pending = asyncio.create_task(self._read_page(key, read), name="job-page-read")
            pending.add_done_callback(_retrieve_error)
            self._page_reads[key] = pending
        return pending

    async def _read_page(self, key: Hashable, read: Callable[[], Awaitable[JobList]]) -> JobList:
        read_at = time.monotonic()
        try:
            page = await read()
        finally:
            self._page_reads.pop(key, None)
        if len(self._pages) >= CAPACITY:
            self._pages.clear()
        self._pages[key] = (read_at, page)
        return page

    def written(self, view: JobView) -> None:
        """The API has just written this job (created or cancelled it): index its view, drop the pages."""
        self.put(view)
        self._pages.clear()

    async def view(self, job_id: str, read: Callable[[], Awaitable[JobView | None]]) -> JobView | None:
        """The indexed view of `job_id` if fresh enough, else the result of `read()` (shared by concurrent callers)."""
        if self.refresh_seconds > 0:
            self._asked[job_id] = time.monotonic()
        hit = self._entries.get(job_id)
        if hit is not None and self._fresh(*hit):
            return hit[1]
        pending = self._reads.get(job_id)
        if pending is not None:
            await asyncio.wait([pending])
            if not pending.cancelled():
                return pending.result()
        return await self._read(job_id, read)

    def _fresh(self, read_at: float, view: JobView) -> bool:
        if view.state.is_terminal():
            return True
        if self.refresh_seconds <= 0:
            return False
        return time.monotonic() - read_at < self.max_stale_seconds

    async def _read(self, job_id: str, read: Callable[[], Awaitable[JobView | None]]) -> JobView | None:
        pending: asyncio.Future[JobView | None] = asyncio.get_running_loop().create_future()
        self._reads[job_id] = pending
        read_at = time.monotonic()
        try:
            view = await read()
        except BaseException:
            pending.cancel()  # waiters read for themselves; the error reaches this caller only
            raise
        finally:
            self._reads.pop(job_id, None)
        pending.set_result(view)
        if view is not None:
            self.put(view, read_at=read_at)
        return view

    def put(self, view: JobView, *, read_at: float | None = None) -> None:
        """Remember a view read (at monotonic time `read_at`) or just written; a newer entry is kept."""
        read_at = time.monotonic() if read_at is None else read_at
        current = self._entries.get(view.id)
        if current is not None and current[0] > read_at:
            return  # written by the API after this view was read: the entry is the newer truth
        if current is None and len(self._entries) >= CAPACITY:
            self._entries.clear()
            self._asked.clear()
        self._entries[view.id] = (read_at, view)

    def _polled_live_ids(self) -> list[str]:
        """Ids of the indexed queued or running jobs asked for lately; the others leave the index."""
        since = time.monotonic() - self.max_stale_seconds
        self._asked = {job_id: at for job_id, at in self._asked.items() if at >= since}
        live = [job_id for job_id, (_, view) in self._entries.items() if not view.state.is_terminal()]
        for job_id in live:
            if job_id not in self._asked:
                del self._entries[job_id]
        return [job_id for job_id in live if job_id in self._asked]

    async def refresh(self, store: Store) -> None:
        """Re-read every polled queued or running job: one listing for the running ones, a read for the rest."""
        live = self._polled_live_ids()
        if not live:
            return
        read_at = time.monotonic()
        running = await _running_jobs(store) if len(live) > 1 else {}
        for job_id in live:
            job = running.get(job_id) or await store.get_job(job_id)
            if job is None:
                self._entries.pop(job_id, None)
                continue
            self.put(await read_view(store, job), read_at=read_at)

    async def keep_fresh(self, store: Store) -> None:
        """Refresh the index every `refresh_seconds` until cancelled; a failed refresh is retried next time."""
        if self.refresh_seconds <= 0:
            return
        while True:
            await asyncio.sleep(self.refresh_seconds)
            try:
                await self.refresh(store)
            except Exception:  # noqa: BLE001 - a database hiccup must not stop the refresher
                log.exception("job_view_refresh_failed")

    @contextlib.asynccontextmanager
    async def refreshing(self, store: Store) -> AsyncIterator[None]:
        """Run `keep_fresh` for the duration of the block (the app's lifespan)."""
        task = asyncio.create_task(self.keep_fresh(store), name="job-view-refresh")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _retrieve_error(task: asyncio.Task[JobList]) -> None:
    # Every waiter sees a failed read's error; if all of them gave up, nobody is left to retrieve it.
    if not task.cancelled():
        task.exception()


async def read_view(store: Store, job: JobRecord) -> JobView:
    """A job's view as stored now, with its queue position."""
    return job_view(job, await store.queue_position(job))


async def _running_jobs(store: Store) -> dict[str, JobRecord]:
    found: dict[str, JobRecord] = {}
    cursor: str | None = None
    while True:
        page = await store.list_jobs(state=JobState.RUNNING, limit=_RUNNING_PAGE, cursor=cursor)
        found.update((job.id, job) for job in page.items)
        cursor = page.next_cursor
        if cursor is None:
            return found
