"""Glossaries in Redis, shared by replicas: a hash per glossary and a set of ids per owner, written in one MULTI."""

from __future__ import annotations

import msgspec

from app import redis_client
from app.glossaries.records import Glossary

PREFIX = "mt:glossary:"


def _owned(owner: str) -> str:
    return f"{PREFIX}owner:{owner}"


class RedisGlossaries:
    """The GlossaryStore over one Redis connection pool."""

    def __init__(self, url: str, timeout: float = 30.0):
        self.redis = redis_client.connect(url, timeout)

    async def add(self, glossary: Glossary) -> None:
        g = glossary
        fields = {"owner": g.owner, "name": g.name, "source": g.source, "target": g.target, "created": g.created,
                  "entries": msgspec.json.encode(g.entries)}  # fmt: skip
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(PREFIX + g.id, mapping=fields)
            pipe.sadd(_owned(g.owner), g.id)
            await pipe.execute()

    async def get(self, glossary_id: str, owner: str) -> Glossary | None:
        f = await self.redis.hgetall(PREFIX + glossary_id)
        if not f or f[b"owner"].decode() != owner:
            return None
        entries = tuple(tuple(e) for e in msgspec.json.decode(f[b"entries"]))
        text = {k: f[k.encode()].decode() for k in ("name", "source", "target")}
        return Glossary(**text, entries=entries, owner=owner, id=glossary_id, created=float(f[b"created"]))

    async def list(self, owner: str) -> list[Glossary]:
        ids = sorted(i.decode() for i in await self.redis.smembers(_owned(owner)))
        found = [g for i in ids if (g := await self.get(i, owner)) is not None]
        return sorted(found, key=lambda g: (g.created, g.id))

    async def delete(self, glossary_id: str, owner: str) -> bool:
        if await self.get(glossary_id, owner) is None:
            return False
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(PREFIX + glossary_id)
            pipe.srem(_owned(owner), glossary_id)
            await pipe.execute()
        return True

    async def probe(self) -> None:
        await redis_client.probe(self.redis)

    async def close(self) -> None:
        await self.redis.aclose()
