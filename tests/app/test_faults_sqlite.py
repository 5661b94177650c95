"""The SQLite key store and the document store failing under a real server: a key file locked by another process past
the busy timeout, a key file on a read-only filesystem, and a full document directory (small tmpfs mounts where the
machine lets the tests mount, else those two tests skip and a test double at the file layer stands in for the full
disk). Each answers the contract's error, tells readiness what it should, and recovers by itself."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.documents.store import FileStore
from app.errors import ApiError
from app.keys.sqlite_store import SqliteStore
from bench.harness.client import HTTP, metrics, value
from bench.harness.server import ServerProcess, add_keys
from tests.app.faults import check_unavailable, mount_tmpfs, ready_within, remount, unmount
from tests.app.helpers import body

BUDGET_S = 0.5  # --store-timeout-seconds of these servers (SQLite's busy timeout: 0.45 s)
KEYED = body("the cat sleeps", api_key="good-key")
HOLD = "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); db.execute('BEGIN IMMEDIATE'); "
HOLD += "print('locked', flush=True); sys.stdin.read()"  # another process holding the write lock until its stdin ends


@pytest.fixture(scope="module")
def mounts(tmp_path_factory):
    """Folders for the keys (4 MiB) and the translated files (1 MiB): tmpfs mounts where allowed (else plain
    folders, and `mounted` False), unmounted at the end."""
    root = tmp_path_factory.mktemp("mounts")
    folders = {name: root / name for name in ("keys", "files", "readonly")}
    mounted = all([mount_tmpfs(folders["keys"], "4m"), mount_tmpfs(folders["files"], "1m"),
                   mount_tmpfs(folders["readonly"], "4m")])  # fmt: skip
    yield folders, mounted
    for folder in folders.values():
        unmount(folder)


def keyed_server(model: Path, folder: Path, *args: str, before=lambda: None) -> ServerProcess:
    """A server with keys in folder/keys.sqlite (one key: good-key) and the store budget; `before()` runs once the
    key is stored, before the server starts."""
    db = add_keys(folder / "keys.sqlite", {"good-key": {}})
    before()
    flags = ("--api-keys", "--keys-db", str(db), "--store-timeout-seconds", str(BUDGET_S), "--warmup-rounds", "0")
    return ServerProcess("--model", str(model), *flags, *args)


@pytest.fixture(scope="module")
def sqlite_server(native_dir, mounts):
    """Keys on the keys mount, translated files on the 1 MiB files mount."""
    folders, _ = mounts
    server = keyed_server(native_dir, folders["keys"], "--files-dir", str(folders["files"])).wait()
    yield server
    server.stop()


def test_sqlite_locked_past_the_busy_timeout(sqlite_server):
    """Another process holds the key file's write lock for longer than the budget: requests get 503 unavailable naming
    the key store within the budget (SQLite's busy timeout reports the lock), readiness 503; the lock released,
    ready again within 2 s."""
    # catches: SQLite's 30 s busy timeout kept (the thread would hang on the lock past the budget)
    db = sqlite_server.args[sqlite_server.args.index("--keys-db") + 1]
    assert HTTP.post(sqlite_server.url + "/translate", json=KEYED).status_code == 200
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, db], **pipes)
    try:
        assert holder.stdout.readline().strip() == "locked"
        start = time.monotonic()
        check_unavailable(HTTP.post(sqlite_server.url + "/translate", json=KEYED), "key store unavailable (Operational")
        assert time.monotonic() - start < BUDGET_S + 0.5
        ready = HTTP.get(sqlite_server.url + "/health/ready")
        assert ready.status_code == 503 and "key store" in ready.json()["reason"]
        assert HTTP.get(sqlite_server.url + "/health/live").status_code == 200
    finally:
        holder.communicate("")
    assert ready_within(sqlite_server, 2.0) < 2.0
    assert HTTP.post(sqlite_server.url + "/translate", json=KEYED).status_code == 200


def upload(server: ServerProcess, **fields) -> object:
    """POST /translate_file of a small text file with the good key."""
    data = {"source": "en", "target": "es", "api_key": "good-key", **fields}
    return HTTP.post(server.url + "/translate_file", data=data, files={"file": ("a.txt", b"The cat sleeps.\n")})


def engine_requests(server: ServerProcess) -> float:
    """Units the engine has finished (mt_requests_total, every label)."""
    return sum(v for (name, _), v in metrics(server.url).items() if name == "mt_requests_total")


def test_document_directory_full(sqlite_server, mounts):
    """The translated files' disk fills up: a file to be stored gets 507 insufficient_storage (the next one at once,
    before it is translated), text requests and files answered directly go on, readiness stays 200; space freed: a
    file is stored again within 2 s, and downloads work."""
    # catches: a full disk answered 500; a file translated only to be refused; no recovery
    folders, mounted = mounts
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): test_full_disk_file_double covers it")
    assert upload(sqlite_server).status_code == 200
    filler = folders["files"] / "filler"
    with filler.open("wb") as f, pytest.raises(OSError) as full:
        while True:
            f.write(b"x" * 65536)
            f.flush()
    assert full.value.errno == errno.ENOSPC
    try:
        check_unavailable(upload(sqlite_server), "document store is full", 507, "insufficient_storage")
        translated = engine_requests(sqlite_server)
        check_unavailable(upload(sqlite_server), "document store is full", 507, "insufficient_storage")
        assert engine_requests(sqlite_server) == translated  # refused before it was translated
        assert HTTP.post(sqlite_server.url + "/translate", json=KEYED).status_code == 200
        direct = upload(sqlite_server, direct="true")
        assert direct.status_code == 200 and direct.content
        assert HTTP.get(sqlite_server.url + "/health/ready").status_code == 200
        assert value(metrics(sqlite_server.url), "mt_dependency_up", dependency="document_store") == 0
    finally:
        filler.unlink()
    deadline = time.monotonic() + 2.0
    while (r := upload(sqlite_server)).status_code != 200:
        assert time.monotonic() < deadline, r.text
        time.sleep(0.05)
    got = HTTP.get(r.json()["translatedFileUrl"], params={"api_key": "good-key"})
    assert got.status_code == 200 and got.content


def test_full_disk_file_double(tmp_path, monkeypatch):
    """The same policy at the file layer, wherever the tests run: writes failing with ENOSPC make save() answer 507
    (and ready() at once after), EROFS 503; once writes succeed the probe ends the outage."""
    # catches: an OSError of the disk left to the 500 handler; no recovery without a restart
    store = FileStore(str(tmp_path), ttl=60, timeout=1.0)
    failure = {"errno": errno.ENOSPC}
    real = Path.write_bytes

    def write_bytes(path: Path, data: bytes) -> int:
        if failure["errno"]:
            raise OSError(failure["errno"], "injected")
        return real(path, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)

    async def run() -> list[int]:
        statuses = []
        for code in (errno.ENOSPC, errno.EROFS):
            failure["errno"] = code
            with pytest.raises(ApiError) as refused:
                await store.save(b"data", "a.txt", None)
            with pytest.raises(ApiError) as at_once:
                store.ready()
            statuses += [refused.value.status, at_once.value.status]
            failure["errno"] = 0
            for _ in range(40):  # the probe retries within a second
                await asyncio.sleep(0.05)
                if store.dependency.up:
                    break
            store.ready()
        name = await store.save(b"data", "a.txt", None)
        assert store.get(name, None) == b"data"
        return statuses

    assert asyncio.run(run()) == [507, 507, 503, 503]
    assert len(list(tmp_path.glob("*.txt"))) == 1  # the stored file, no half-written ones


def test_sqlite_read_only(native_dir, mounts):
    """The key file's filesystem is read-only: requests get 503 unavailable naming the key store, readiness 503,
    liveness 200; remounted read-write, ready within 2 s without a restart (the connection is opened again)."""
    # catches: a connection that, once opened read-only, never writes again
    folders, mounted = mounts
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    server = keyed_server(native_dir, folders["readonly"], before=lambda: remount(folders["readonly"], "ro"))
    try:
        server.wait("/health/live")
        deadline = time.monotonic() + 30
        while (ready := HTTP.get(server.url + "/health/ready")).json()["reason"] == "loading models":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert ready.status_code == 503 and "key store unavailable" in ready.json()["reason"]
        check_unavailable(HTTP.post(server.url + "/translate", json=KEYED), "key store")
        assert HTTP.get(server.url + "/health/live").status_code == 200
        remount(folders["readonly"], "rw")
        assert ready_within(server, 2.0) < 2.0
        assert HTTP.post(server.url + "/translate", json=KEYED).status_code == 200
    finally:
        server.stop()


class Failing:
    """A connection stand-in whose next statement raises `error`, then behaves as the real one."""

    def __init__(self, db: sqlite3.Connection, error: sqlite3.Error):
        self.db, self.error = db, error

    def execute(self, *args):
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return self.db.execute(*args)

    def close(self) -> None:
        self.db.close()


def test_a_broken_connection_is_opened_again(tmp_path):
    """A statement failing with an I/O error closes the store's connection and the next call opens a new one; a busy
    lock keeps it (the connection is fine: another process holds the lock)."""
    # catches: a connection kept after it failed (one opened read-only, or after an I/O error, would never write again)
    store = SqliteStore(tmp_path / "keys.sqlite")
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorname = "SQLITE_BUSY"

    async def kept_after(error: sqlite3.Error) -> bool:
        """Whether the store holds the same connection after a statement failed with `error`."""
        await store.probe()  # opened
        store.db = Failing(store.db, error)
        with pytest.raises(sqlite3.OperationalError):
            await store.probe()
        kept = isinstance(store.db, Failing)
        await store.probe()  # and it works again either way
        return kept

    async def run() -> list[bool]:
        kept = [await kept_after(sqlite3.OperationalError("disk I/O error")), await kept_after(busy)]
        await store.close()
        return kept

    assert asyncio.run(run()) == [False, True]
