"""DeepL's document jobs on disk, so that any HTTP worker answers a job's status and result: a JSON record per job
(its key only as a hash) written whole and renamed into place, and the translated file, taken once by rename."""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
import time
from pathlib import Path

from app.errors import ApiError
from app.keys.records import key_hash

ID = re.compile(r"^[0-9A-F]{32}$")


class DocumentJobs:
    """`create` a job, `update` its record as it runs, `finish` it with the file; `get` and `take` it by id and key."""

    def __init__(self, folder: str, ttl: float):
        self.root = Path(folder or Path(tempfile.gettempdir()) / "mt-server-files") / "deepl"
        self.ttl = ttl

    def _record(self, doc_id: str) -> Path:
        return self.root / f"{doc_id}.json"

    def _result(self, doc_id: str) -> Path:
        return self.root / f"{doc_id}.out"

    def _write(self, doc_id: str, record: dict) -> None:
        """Replace the record at once (readers never see half of it)."""
        tmp = self.root / f"{doc_id}.{secrets.token_hex(4)}.tmp"
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self._record(doc_id))

    def create(self, filename: str, media_type: str, chars: int) -> tuple[str, str]:
        """A new queued job: its (document_id, document_key)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.sweep()
        doc_id, doc_key = secrets.token_hex(16).upper(), secrets.token_hex(32).upper()
        record = {"key": key_hash(doc_key), "status": "queued", "filename": filename, "media_type": media_type,
                  "billed_characters": chars, "seconds_remaining": None, "error_message": None,
                  "expires": time.time() + self.ttl}  # fmt: skip
        self._write(doc_id, record)
        return doc_id, doc_key

    def update(self, doc_id: str, **fields) -> None:
        """Change fields of a job's record."""
        record = json.loads(self._record(doc_id).read_text())
        self._write(doc_id, {**record, **fields})

    def finish(self, doc_id: str, data: bytes) -> None:
        """Keep the translated file and mark the job done."""
        self._result(doc_id).write_bytes(data)
        self.update(doc_id, status="done", seconds_remaining=0)

    def get(self, doc_id: str, doc_key: str) -> dict:
        """A job's record; 404 naming the field for an unknown or expired id, a wrong key or a downloaded result."""
        try:
            record = json.loads(self._record(doc_id).read_text()) if ID.match(doc_id) else None
        except (OSError, ValueError):
            record = None
        if record is None or record["expires"] < time.time():
            raise ApiError(404, "not_found", f"document_id: document {doc_id} not found (or expired)")
        if record["key"] != key_hash(doc_key):
            raise ApiError(404, "not_found", f"document_key: not the key of document {doc_id}")
        if record["status"] == "downloaded":
            raise ApiError(404, "not_found", f"document_id: the result of {doc_id} was downloaded (returned once)")
        return record

    def take(self, doc_id: str, doc_key: str) -> tuple[bytes, dict]:
        """The translated file and its record, once: the first caller renames it away, later ones get a 404."""
        record = self.get(doc_id, doc_key)
        taken = self.root / f"{doc_id}.{secrets.token_hex(4)}.taken"
        try:
            os.rename(self._result(doc_id), taken)
        except OSError:
            raise ApiError(
                404, "not_found", f"document_id: the result of {doc_id} was downloaded (returned once)"
            ) from None
        data = taken.read_bytes()
        taken.unlink()
        self.update(doc_id, status="downloaded")
        return data, record

    def sweep(self) -> None:
        """Remove expired jobs and their files."""
        now = time.time()
        for path in self.root.glob("*.json"):
            try:
                if json.loads(path.read_text())["expires"] < now:
                    self._result(path.stem).unlink(missing_ok=True)
                    path.unlink(missing_ok=True)
            except (OSError, ValueError, KeyError):
                continue
