"""Files that go over the wire whole (snapshot tars): sent as a request body and received into a file in chunks,
never held in memory. Shared by the sync and async clients, which only read and write the chunks differently.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import BinaryIO

import anyio

from vela_client.errors import ChecksumMismatch

# Big enough that a 256 MiB tar is a few hundred reads (each a thread hop in the async client), small enough to
# keep memory flat.
CHUNK_BYTES = 1 << 20


def file_sha256(path: Path) -> str:
    """The file's sha256, as `sha256sum` prints it (the form the API lists and takes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def file_chunks(path: Path) -> Iterator[bytes]:
    """The file from its start, chunk by chunk (a new iterator for each try, so a retry sends it whole again)."""
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            yield chunk


async def file_chunks_async(path: Path) -> AsyncIterator[bytes]:
    """`file_chunks` for the async client: each read in a worker thread, off the event loop."""
    async with await anyio.open_file(path, "rb") as f:
        while chunk := await f.read(CHUNK_BYTES):
            yield chunk


class DownloadTarget:
    """Where a download is written: a temporary file beside `path`, hashed as it is written, renamed to `path` by
    `finish` once whole (and its sha256 checked when one is `expected`). Until then nothing is at `path`; a download
    that fails leaves nothing behind once `discard` has run (the clients call it in a `finally`)."""

    def __init__(self, path: Path, *, expected_sha256: str | None) -> None:
        self.path = path
        self.expected_sha256 = expected_sha256
        self._file: BinaryIO | None = None
        self._temp: Path | None = None
        self._digest = hashlib.sha256()
        self._done = False

    def begin(self) -> None:
        """Start (or, after a broken try, start over) with an empty file."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)  # "backups/" that is not there yet is made
            fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".part")
            self._file, self._temp = os.fdopen(fd, "wb"), Path(name)
        else:
            self._file.seek(0)
            self._file.truncate()
        self._digest = hashlib.sha256()

    def write(self, chunk: bytes) -> None:
        assert self._file is not None, "begin() first"
        self._file.write(chunk)
        self._digest.update(chunk)

    def finish(self) -> Path:
        """Check the file and rename it into place: ChecksumMismatch (and no file at `path`) when it differs."""
        assert self._file is not None and self._temp is not None, "begin() first"
        got = self._digest.hexdigest()
        if self.expected_sha256 is not None and got != self.expected_sha256:
            raise ChecksumMismatch(
                f"the download of {self.path.name} has sha256 {got}, the listing says {self.expected_sha256}: "
                f"it was damaged on the way or on the server; nothing was written to {self.path}",
                code="sha256_mismatch",
            )
        self._file.flush()
        os.fsync(self._file.fileno())  # whole on disk before it takes the name: a crash leaves no torn file there
        self._file.close()
        os.replace(self._temp, self.path)
        self._done = True
        return self.path

    def discard(self) -> None:
        """Remove the temporary file, unless `finish` renamed it into place."""
        if self._file is not None:
            self._file.close()
        if self._temp is not None and not self._done:
            with contextlib.suppress(FileNotFoundError):
                self._temp.unlink()


def download_path(path: str | os.PathLike[str], snapshot: str) -> Path:
    """Where `download_snapshot` writes: `path`, or the snapshot's own name inside it when it is a folder (or is
    written as one, "backups/", which the download then makes, as it makes any missing parent of `path`)."""
    given = os.fspath(path)
    target = Path(given)
    return target / snapshot if given.endswith(("/", os.sep)) or target.is_dir() else target
