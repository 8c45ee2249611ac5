"""Crash-safe files: atomic replace, directory fsync, and SQLite databases that many processes open at once."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Literal
from urllib.parse import quote

import numpy as np

BUSY_TIMEOUT_S = 60.0


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                f = open(os.path.join(dirpath, name), "rb")  # noqa: SIM115
            except FileNotFoundError:
                continue  # removed since the listing (SQLite drops its -wal at the last close): nothing to sync
            with f:
                os.fsync(f.fileno())
        fsync_dir(Path(dirpath))


def in_data_dir(path: Path, data_dir: Path) -> str:
    """A path a queued job records: relative to the data directory where it lies inside it, so that the job still
    finds it (and writes nowhere else) after the data directory is moved or mounted elsewhere; else absolute."""
    path, data_dir = path.expanduser().resolve(), data_dir.expanduser().resolve()
    return str(path.relative_to(data_dir)) if path.is_relative_to(data_dir) else str(path)


def from_data_dir(recorded: str, data_dir: Path) -> Path:
    """A path `in_data_dir` recorded, in the data directory the job runs against (absolute ones as they are)."""
    path = Path(recorded)
    return path if path.is_absolute() else data_dir / path


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to a temp file beside `path`, fsync it, rename it over `path`, fsync the directory:
    a reader sees the old bytes or the new ones, never a mix, and a crash leaves one of the two."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


# numpy parses a .npy header with ast.literal_eval, and CPython 3.11's AST constructor is not safe across threads
# (gh-106905: "SystemError: AST constructor recursion depth mismatch" when two threads parse at once; a search's
# catch-up and the background reader both load segments). One header at a time; the data itself is mapped.
_NPY_LOCK = threading.Lock()


def load_npy(path: Path, *, mmap_mode: Literal["r"] | None = None) -> np.ndarray:
    """np.load of a .npy file (never a pickle), one header parse at a time (see _NPY_LOCK)."""
    with _NPY_LOCK:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)


def file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, None when there is none: whether it is still the file once opened."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class LockReentered(RuntimeError):
    """A thread asked for a file lock it holds already: waiting would never end (see `file_lock`)."""


# The lock files each thread holds, by (device, inode). A flock belongs to an open file description, not to the
# process: a thread that opens a lock file it holds and locks it again waits for itself for ever (a worker whose
# rollback opened one generation's writer lock twice hung so, SIGTERM and all). Such a second take is refused.
_held = threading.local()


def _held_here() -> set[tuple[int, int]]:
    held: set[tuple[int, int]] | None = getattr(_held, "locks", None)
    if held is None:
        held = _held.locks = set()
    return held


def _identity(fh: IO[str]) -> tuple[int, int]:
    st = os.fstat(fh.fileno())
    return st.st_dev, st.st_ino


@contextmanager
def _holding(fh: IO[str]) -> Iterator[None]:
    """Records that this thread holds the lock on `fh` (the caller has just taken it) until the block ends."""
    key = _identity(fh)
    _held_here().add(key)
    try:
        yield
    finally:
        _held_here().discard(key)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (flock), released by the kernel when the holder dies. Other threads of
    this process wait for it as other processes do; the thread that holds it gets LockReentered instead."""
    with open(path, "a+") as fh:
        if _identity(fh) in _held_here():
            raise LockReentered(f"{path.name} is held by this thread already: taking it again would wait for ever")
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            with _holding(fh):
                yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def try_file_lock(path: Path) -> Iterator[bool]:
    """file_lock without waiting: yields False (and holds nothing) when another holder has it."""
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            with _holding(fh):
                yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def init_sqlite(path: Path, init: Callable[[sqlite3.Connection], None]) -> None:
    """Create or migrate a database that several processes may open at the same moment.

    Switching a new database to WAL takes an exclusive lock for which SQLite does not wait (no busy
    handler): two workers starting together got "database is locked". So the one-time work (WAL, schema,
    migrations) runs under a file lock beside the database, one process after another; every later
    connection finds WAL already set (it is persistent) and only sets per-connection pragmas."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_name(path.name + ".init-lock")):
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            init(conn)
        finally:
            conn.close()


WAL_KEEP_BYTES = 4 * 1024 * 1024


def connect_sqlite(path: Path, *, foreign_keys: bool = False) -> sqlite3.Connection:
    """A connection to a database made by init_sqlite (WAL, FULL sync: a commit is on disk when it returns).

    FULL rather than NORMAL: NORMAL survives a process crash, but a power loss or a kernel crash can roll back the
    last commits, and a doc store and the job store roll back independently (a job recorded `succeeded` whose
    documents were lost). FULL costs one fsync per transaction: about 0.3 ms here (a job's create, start, progress
    and end, 0.31 ms in all with NORMAL and 1.54 ms with FULL: bench/sqlite_sync.py), small beside embedding a batch.

    It opens the file read-write and never creates it (SQLite's `mode=rw`): a thread still working on a collection
    that was deleted meanwhile gets an error, instead of leaving an empty database where the collection was."""
    uri = f"file:{quote(os.fspath(path))}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA synchronous=FULL")
    # After each checkpoint the write-ahead log is cut back to this size: SQLite otherwise keeps the file at the
    # largest size a burst of writes gave it, for as long as the database is open.
    conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
    if foreign_keys:
        conn.execute("PRAGMA foreign_keys=ON")
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on `conn` (BEGIN IMMEDIATE: the write lock is taken at once, so reads in the block see
    what no other writer can change before the commit), committed when the block ends, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if one is still open: SQLite rolls back by itself on some errors (a
    full disk), and a second ROLLBACK would then raise and hide the error that mattered."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
