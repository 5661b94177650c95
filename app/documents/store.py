"""Translated files waiting for download: on disk (shared by every HTTP worker), bound to the uploader's API key
(its SHA-256), removed after the TTL. A disk that fails a write starts an outage (app.dependency): files to be stored
get 507 `insufficient_storage` on a full disk, 503 `unavailable` otherwise, before they are translated, until a probe
write succeeds; text requests, files answered directly and downloads of stored files go on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import tempfile
import time
from pathlib import Path

from app.dependency import Dependency
from app.errors import ApiError
from app.keys.records import key_hash
from app.metrics import Metrics

NAME = re.compile(r"^[A-Za-z0-9_-]{22}\.[A-Za-z0-9_.-]{1,200}$")


def safe_filename(filename: str) -> str:
    """The uploaded name reduced to safe characters (no folders)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", filename.replace("\\", "/").rsplit("/", 1)[-1]).strip("._")
    return name[-200:] or "file"


class FileStore:
    """`put` keeps a file and names it; `get` returns it to the same API key until it expires."""

    def __init__(self, folder: str, ttl: float, metrics: Metrics | None = None, timeout: float = 30.0):
        self.root = Path(folder or Path(tempfile.gettempdir()) / "mt-server-files")
        self.ttl = ttl
        self.dependency = Dependency("document_store", metrics or Metrics(), timeout, (OSError,), self._probe)

    def ready(self) -> None:
        """507 or 503 at once while the store cannot take files (checked before a file is translated for it)."""
        self.dependency.require()

    async def save(self, data: bytes, filename: str, api_key: str | None) -> str:
        """put() off the event loop, as the dependency: 507 on a full disk, 503 for another failure or past the
        budget."""
        return await self.dependency.call(lambda: asyncio.to_thread(self.put, data, filename, api_key))

    async def _probe(self) -> None:
        """Write a small file and remove it."""

        def write() -> None:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".probe-{secrets.token_hex(4)}"
            try:
                probe.write_bytes(b"x" * 4096)
            finally:
                probe.unlink(missing_ok=True)

        await asyncio.to_thread(write)

    def put(self, data: bytes, filename: str, api_key: str | None) -> str:
        """Store a translated file; its download name (random, then the file name)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.sweep()
        name = f"{secrets.token_urlsafe(16)}.{safe_filename(filename)}"
        meta = {"key": key_hash(api_key or ""), "expires": time.time() + self.ttl}
        try:
            (self.root / name).write_bytes(data)
            (self.root / f"{name}.json").write_text(json.dumps(meta))
        except OSError:
            for path in (self.root / name, self.root / f"{name}.json"):  # no half-written file stays behind
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
            raise
        return name

    def get(self, name: str, api_key: str | None) -> bytes:
        """The file; 404 when unknown, expired, or given to another API key (a request naming no key may fetch a
        file by its unguessable name, as LibreTranslate's clients do)."""
        missing = ApiError(404, "not_found", f"file: {name} not found or expired")
        if not NAME.match(name):
            raise missing
        try:
            meta = json.loads((self.root / f"{name}.json").read_text())
            data = (self.root / name).read_bytes()
        except (FileNotFoundError, ValueError):
            raise missing from None
        except OSError as exc:
            raise ApiError(503, "unavailable", f"document store unavailable ({type(exc).__name__}); retry later",
                           {"Retry-After": "1"}) from None  # fmt: skip
        if meta["expires"] < time.time() or (api_key is not None and meta["key"] != key_hash(api_key)):
            raise missing
        return data

    def sweep(self) -> None:
        """Remove expired files."""
        now = time.time()
        for meta in self.root.glob("*.json"):
            try:
                if json.loads(meta.read_text())["expires"] < now:
                    (self.root / meta.name.removesuffix(".json")).unlink(missing_ok=True)
                    meta.unlink(missing_ok=True)
            except (OSError, ValueError, KeyError):
                continue
