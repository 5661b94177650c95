"""Translated files waiting for download: on disk (shared by every HTTP worker), bound to the uploader's API key
(its SHA-256), removed after the TTL."""

from __future__ import annotations

import json
import re
import secrets
import tempfile
import time
from pathlib import Path

from app.errors import ApiError
from app.keys.records import key_hash

NAME = re.compile(r"^[A-Za-z0-9_-]{22}\.[A-Za-z0-9_.-]{1,200}$")


def safe_filename(filename: str) -> str:
    """The uploaded name reduced to safe characters (no folders)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", filename.replace("\\", "/").rsplit("/", 1)[-1]).strip("._")
    return name[-200:] or "file"


class FileStore:
    """`put` keeps a file and names it; `get` returns it to the same API key until it expires."""

    def __init__(self, folder: str, ttl: float):
        self.root = Path(folder or Path(tempfile.gettempdir()) / "mt-server-files")
        self.ttl = ttl

    def put(self, data: bytes, filename: str, api_key: str | None) -> str:
        """Store a translated file; its download name (random, then the file name)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.sweep()
        name = f"{secrets.token_urlsafe(16)}.{safe_filename(filename)}"
        meta = {"key": key_hash(api_key or ""), "expires": time.time() + self.ttl}
        (self.root / name).write_bytes(data)
        (self.root / f"{name}.json").write_text(json.dumps(meta))
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
        except (OSError, ValueError):
            raise missing from None
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
