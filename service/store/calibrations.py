"""Calibration queries: fitted calibrations kept across jobs, looked up by model, GPU and SGLang version."""

from __future__ import annotations

import msgspec
from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from service.domain import Calibration
from service.store import tables as t
from service.store.codec import dumps, new_id
from service.store.core import StoreCore


class CalibrationQueries(StoreCore):
    """Save, list, fetch and delete calibrations."""

    async def save_calibration(self, calibration: Calibration) -> Calibration:
        """Store a calibration (an id and creation time are given when it has none); the stored one."""
        stored = msgspec.structs.replace(calibration, id=calibration.id or new_id("cal"),
                                         created_at=calibration.created_at or self.clock())
        key = stored.key

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(insert(t.calibrations).values(
                id=stored.id, model=key.model, gpu=key.gpu, sglang_version=key.sglang_version, layout=key.layout,
                cost_model=stored.cost_model, body=dumps(stored), created_at=stored.created_at))
        await self._write(work)
        return stored

    async def list_calibrations(self, *, model: str | None = None, gpu: str | None = None,
                                sglang_version: str | None = None) -> list[Calibration]:
        """Calibrations, newest first, of one model, GPU and SGLang version when given."""
        query = select(t.calibrations.c.body).order_by(t.calibrations.c.created_at.desc(), t.calibrations.c.id)
        for column, value in (("model", model), ("gpu", gpu), ("sglang_version", sglang_version)):
            if value is not None:
                query = query.where(t.calibrations.c[column] == value)

        async def work(conn: AsyncConnection) -> list[Calibration]:
            rows = (await conn.execute(query)).all()
            return [msgspec.json.decode(row[0], type=Calibration) for row in rows]
        return await self._read(work)

    async def get_calibration(self, calibration_id: str) -> Calibration | None:
        """One calibration, or None."""
        async def work(conn: AsyncConnection) -> Calibration | None:
            row = (await conn.execute(select(t.calibrations.c.body).where(
                t.calibrations.c.id == calibration_id))).first()
            return None if row is None else msgspec.json.decode(row[0], type=Calibration)
        return await self._read(work)

    async def delete_calibration(self, calibration_id: str) -> bool:
        """Delete a calibration; False when none has that id."""
        async def work(conn: AsyncConnection) -> bool:
            result = await conn.execute(delete(t.calibrations).where(t.calibrations.c.id == calibration_id))
            return result.rowcount == 1
        return await self._write(work)
