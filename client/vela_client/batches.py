"""Cutting a stream of documents into `POST /index` bodies that fit the server's limits (for `index_in_batches`).

Each document is encoded to JSON once, as it comes, and a batch is sent as exactly those bytes, so its size is
known before it is sent rather than estimated: a batch holds at most `BatchBounds.documents` documents and
`BatchBounds.bytes` bytes of body. Nothing here does I/O; the sync and async clients drive it alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from vela_client import encoding
from vela_client.calls import DocumentLike, _document
from vela_client.errors import PayloadTooLarge
from vela_client.models import Limits

# What a batch holds unless told otherwise. Fewer, larger batches mean fewer jobs and commits on the server; but a
# JSON body is parsed whole on the server's event loop, and a job is the unit of progress and of retry, so the
# default stays well under the server's own ceilings (10,000 documents, 32 MiB by default).
DEFAULT_BATCH_DOCUMENTS = 1000
DEFAULT_BATCH_BYTES = 8 * 1024 * 1024
# Below this a body holds hardly more than its envelope (the server's own floor for VELA_MAX_JSON_BYTES).
MIN_BATCH_BYTES = 1024
_TAIL = b"]}"


@dataclass(frozen=True)
class BatchBounds:
    """How large one request may be: `documents` and `bytes` of body, and `text_bytes` of one document's text
    (the server's VELA_MAX_DOCUMENT_BYTES; None when the server did not say).

    `ceiling` is the body limit known for certain (the caller's `batch_bytes`, the server's announced limit): a
    document that cannot fit it alone is refused before anything is sent. `bytes` starts there and is only ever
    lowered by a 413 the client did not foresee, which says the limit is lower but not by how much: a document
    between the two is still sent, alone, for the server to decide. `server_bytes`: the server's own body limit,
    when known, named in the error for a document over the ceiling."""

    documents: int
    bytes: int
    ceiling: int
    text_bytes: int | None = None
    server_bytes: int | None = None

    def halved(self, refused_documents: int, refused_bytes: int) -> BatchBounds:
        """After a 413 for a batch this large (a limit the client did not know: a proxy's, or an older server's):
        half of it, on both counts, since the answer need not say which count was over."""
        return replace(
            self,
            documents=max(1, min(self.documents, refused_documents // 2)),
            bytes=max(MIN_BATCH_BYTES, min(self.bytes, refused_bytes // 2)),
        )


def _positive(name: str, value: int | None, least: int) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
        raise ValueError(f"{name} must be a whole number of at least {least}, not {value!r}")


def batch_bounds(batch_size: int | None, batch_bytes: int | None, limits: Limits | None) -> BatchBounds:
    """The caller's bounds (or the defaults), never above what the server says it takes (`limits`; None when it
    did not say, as an older server does not)."""
    _positive("batch_size", batch_size, 1)
    _positive("batch_bytes", batch_bytes, MIN_BATCH_BYTES)
    documents = batch_size or DEFAULT_BATCH_DOCUMENTS
    size = batch_bytes or DEFAULT_BATCH_BYTES
    if limits is None:
        return BatchBounds(documents, size, ceiling=size)
    size = min(size, limits.max_json_bytes)
    return BatchBounds(
        documents=min(documents, limits.max_batch_documents),
        bytes=size,
        ceiling=size,
        text_bytes=limits.max_document_bytes,
        server_bytes=limits.max_json_bytes,
    )


def envelope_head(envelope: Mapping[str, Any]) -> bytes:
    """`{"collection":...,...,"documents":[`: every batch's body starts so, and ends with `]}`."""
    return encoding.encode(dict(envelope))[:-1] + b',"documents":['


@dataclass(frozen=True)
class EncodedDocument:
    position: int  # in the caller's input, from 0: how an error names a document, beside its id
    id: Any
    raw: bytes

    @property
    def named(self) -> str:
        return _named(self.position, self.id)


def _named(position: int, doc_id: Any) -> str:
    """How an error names a document: by its place in the input, and by its id when it has one."""
    return f"the document at position {position} (id {str(doc_id)[:100]!r})"


def encode_document(doc: DocumentLike, position: int, bounds: BatchBounds) -> EncodedDocument:
    """One document as the JSON it is sent as; TypeError or ValueError naming it when it cannot be JSON, and
    PayloadTooLarge (code `document_too_large`, before anything of its batch is sent) when its text is over the
    server's limit."""
    data = _document(doc)
    doc_id = data.get("id")
    named = _named(position, doc_id)
    text = data.get("text")
    if bounds.text_bytes is not None and isinstance(text, str):
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > bounds.text_bytes:
            raise PayloadTooLarge(
                f"{named} has {size} bytes of text; the server takes at most {bounds.text_bytes} "
                "(VELA_MAX_DOCUMENT_BYTES): split it into several documents",
                code="document_too_large",
            )
    try:
        raw = encoding.encode(data)
    except TypeError as exc:  # a value JSON has no form for (a set, an object)
        raise TypeError(f"{named} cannot be sent as JSON: {exc}") from exc
    except ValueError as exc:  # NaN or Infinity, or a lone surrogate, which is no Unicode text
        raise ValueError(f"{named} cannot be sent as JSON: {exc}") from exc
    return EncodedDocument(position, doc_id, raw)


@dataclass(frozen=True)
class Batch:
    """Documents sent together, as one request and one job."""

    documents: list[EncodedDocument]
    head: bytes

    def body(self) -> bytes:
        return self.head + b",".join(d.raw for d in self.documents) + _TAIL


class BatchBuilder:
    """Collects encoded documents into batches within `bounds`. A batch also ends before an id it already holds:
    one request may not name an id twice, and as the server runs writes to a collection in the order they were
    sent, the later document wins, as it would have in one request of its own."""

    def __init__(self, head: bytes, bounds: BatchBounds) -> None:
        self.head = head
        self.bounds = bounds
        self._docs: list[EncodedDocument] = []
        self._ids: set[Any] = set()
        self._size = 0

    def add(self, doc: EncodedDocument) -> Batch | None:
        """Add `doc`; returns the batch it did not fit in, now full and to be sent, else None."""
        alone = len(self.head) + len(doc.raw) + len(_TAIL)
        if alone > self.bounds.ceiling:
            raise PayloadTooLarge(self._too_large(doc, alone), code="document_too_large")
        full = None
        if self._docs and (
            len(self._docs) >= self.bounds.documents
            or self._size + 1 + len(doc.raw) > self.bounds.bytes
            or _hashable(doc.id) in self._ids
        ):
            full = self.finish()
        if not self._docs:
            self._size = len(self.head) + len(_TAIL)
        else:
            self._size += 1  # the comma
        self._docs.append(doc)
        self._ids.add(_hashable(doc.id))
        self._size += len(doc.raw)
        return full

    def finish(self) -> Batch | None:
        """The batch collected so far (None when empty); the builder starts a new one."""
        if not self._docs:
            return None
        batch = Batch(self._docs, self.head)
        self._docs, self._ids, self._size = [], set(), 0
        return batch

    def _too_large(self, doc: EncodedDocument, size: int) -> str:
        limit = self.bounds.ceiling
        server = self.bounds.server_bytes
        if server is not None and size <= server:
            hint = f"raise batch_bytes (the server takes up to {server} bytes) or split it"
        elif server is not None:
            hint = "the server's VELA_MAX_JSON_BYTES; split it into several documents"
        else:
            hint = "batch_bytes; split it into several documents"
        return f"{doc.named} makes a request of {size} bytes on its own, over the limit of {limit} ({hint})"


def _hashable(doc_id: Any) -> Any:
    """An id as a set member: the server refuses any id that is not a string, but the client does not decide that."""
    try:
        hash(doc_id)
    except TypeError:
        return repr(doc_id)
    return doc_id


def rebatch(documents: list[EncodedDocument], head: bytes, bounds: BatchBounds) -> list[Batch]:
    """`documents` (a refused batch's) again, in batches within the new `bounds`."""
    builder = BatchBuilder(head, bounds)
    out = [full for doc in documents if (full := builder.add(doc)) is not None]
    last = builder.finish()
    return [*out, last] if last is not None else out
