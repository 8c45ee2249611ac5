"""The write-ahead log of every database a connection from velaio.files opens is cut back after a checkpoint, so
a burst of writes (a re-ingest, a reindex) does not leave the file at its largest size while the server runs."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from velaio.files import WAL_KEEP_BYTES, connect_sqlite, init_sqlite


def test_the_log_is_cut_back_after_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"

    def schema(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE t (b BLOB)")

    init_sqlite(path, schema)
    conn = connect_sqlite(path)
    conn.execute("BEGIN")
    for _ in range(120):
        conn.execute("INSERT INTO t VALUES (?)", (os.urandom(100_000),))
    conn.execute("COMMIT")
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > 2 * WAL_KEEP_BYTES  # the burst, in the log
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # what SQLite's automatic checkpoint does as writes go on
    conn.execute("INSERT INTO t VALUES (x'00')")  # the next write starts the log over, and cuts it back
    assert wal.stat().st_size <= WAL_KEEP_BYTES
