"""API key queries: only a hash of each secret is stored; the secret is shown once, at creation."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from service.store import tables as t
from service.store.codec import AnyRow, new_id
from service.store.core import StoreCore
from service.store.records import ApiKeyRecord, Scope

KEY_PREFIX = "sgt"


def hash_secret(secret: str) -> str:
    """SHA-256 of a key's secret.

    The secrets are 256-bit random tokens, not passwords, so a fast hash is enough: there is nothing to
    brute-force, and every request pays for this check.
    """
    return hashlib.sha256(secret.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """(key id, secret) of a presented `sgt_<id>_<secret>` token, or None when it is not one."""
    parts = token.strip().split("_")
    if len(parts) != 4 or parts[0] != KEY_PREFIX or parts[1] != "key":
        return None
    return f"key_{parts[2]}", parts[3]


class KeyQueries(StoreCore):
    """Create, find, list and revoke API keys."""

    async def create_api_key(self, name: str, scopes: list[Scope]) -> tuple[ApiKeyRecord, str]:
        """A new key and its token (`sgt_key_<id>_<secret>`); the token is never retrievable again."""
        key_id, secret = new_id("key"), secrets.token_urlsafe(32).replace("_", "-")
        ordered = sorted(set(scopes), key=list(Scope).index)
        now = self.clock()

        async def work(conn: AsyncConnection) -> None:
            await conn.execute(insert(t.api_keys).values(
                id=key_id, name=name, secret_hash=hash_secret(secret),
                scopes=",".join(scope.value for scope in ordered), created_at=now))
        await self._write(work)
        record = ApiKeyRecord(id=key_id, name=name, scopes=ordered, created_at=now)
        return record, f"{KEY_PREFIX}_{key_id}_{secret}"

    async def authenticate(self, token: str) -> ApiKeyRecord | None:
        """The live key a token belongs to, or None (unknown, malformed, wrong secret or revoked)."""
        parsed = split_token(token)
        if parsed is None:
            return None
        key_id, secret = parsed
        found = await self._key(key_id)
        if found is None or found.revoked_at is not None:
            return None
        return found if hmac.compare_digest(found.secret_hash, hash_secret(secret)) else None

    async def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, revoked ones included, without hashes."""
        async def work(conn: AsyncConnection) -> list[ApiKeyRecord]:
            rows = (await conn.execute(select(t.api_keys).order_by(t.api_keys.c.created_at))).all()
            return [_key_from_row(row, with_hash=False) for row in rows]
        return await self._read(work)

    async def revoke_api_key(self, key_id: str) -> bool:
        """Revoke a key; False when no live key has that id."""
        async def work(conn: AsyncConnection) -> bool:
            result = await conn.execute(update(t.api_keys).where(
                t.api_keys.c.id == key_id, t.api_keys.c.revoked_at.is_(None)).values(revoked_at=self.clock()))
            return result.rowcount == 1
        return await self._write(work)

    async def _key(self, key_id: str) -> ApiKeyRecord | None:
        async def work(conn: AsyncConnection) -> ApiKeyRecord | None:
            row = (await conn.execute(select(t.api_keys).where(t.api_keys.c.id == key_id))).first()
            return _key_from_row(row, with_hash=True) if row is not None else None
        return await self._read(work)


def _key_from_row(row: AnyRow, *, with_hash: bool) -> ApiKeyRecord:
    m = row._mapping
    return ApiKeyRecord(id=m["id"], name=m["name"], scopes=[Scope(s) for s in m["scopes"].split(",") if s],
                        created_at=m["created_at"], revoked_at=m["revoked_at"],
                        secret_hash=m["secret_hash"] if with_hash else "")
