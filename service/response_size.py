"""The size of a search response body, estimated from the hydrated hits before the body is built, so that a
response past VELA_MAX_RESPONSE_BYTES is refused (413) without the memory and time of building it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache
from typing import Any

from service.limits import float_size, json_size
from service.search import SearchResult
from service.search_schemas import (
    BatchSearchResponse,
    HitOut,
    PassageRef,
    Ranks,
    RerankInfo,
    SearchResponse,
    response_metadata,
)


@cache
def _skeletons() -> tuple[int, int, int]:
    """Bytes of a hit, a result and a batch body without their variable parts: each serialised with the shortest
    values (empty strings and containers, 0 and 0.0, null), less those values' own bytes."""
    hit = HitOut(
        id="",
        score=0.0,
        title="",
        text="",
        metadata={},
        passage=PassageRef(id=0, index=0, start=0, end=0),
        ranks=Ranks(dense=None, bm25=None),
        rerank_score=None,
        highlights=None,
    )
    hit_fixed = len(hit.model_dump_json()) - len('""0.0""""{}0000nullnullnullnull')
    result_fixed = len(SearchResponse(hits=[], took_ms=0.0).model_dump_json()) - len("0.0null")
    batch_fixed = len(BatchSearchResponse(results=[], took_ms=0.0).model_dump_json()) - len("0.0")
    return hit_fixed, result_fixed, batch_fixed


TOOK_MS_BYTES = 24  # the longest a float is written ("-1.2345678901234567e-300"): the batch's took_ms is not known yet


def _int_size(value: int | None) -> int:
    return 4 if value is None else len(str(value))


def _spans_size(spans: list[tuple[int, int]] | None) -> int:
    """[[s,e],...] as serialised: brackets, each pair's digits and comma, the commas between pairs; null."""
    if spans is None:
        return 4
    return 2 + sum(len(str(s)) + len(str(e)) + 3 for s, e in spans) + max(len(spans) - 1, 0)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except RecursionError:  # metadata nested past the interpreter's limit: measured on its own
        return False


def estimated_size(results: Sequence[SearchResult], *, batch: bool) -> int:
    """The body's size, from the hydrated hits, without building it: strings and metadata exactly as they are
    serialised (each text, title and metadata object measured once: hits of one passage share them across the
    queries, and passages of one document share equal metadata), numbers by their own lengths. Never below the
    body's size; above it by at most a byte per float written with a small exponent (json_size)."""
    hit_fixed, result_fixed, batch_fixed = _skeletons()
    strings: dict[int, int] = {}  # id() of an id, title or text -> its size; the objects live in `results` meanwhile
    metadata: dict[str, tuple[Any, int]] = {}  # doc id -> (a metadata object of it, its size as a hit carries it)

    def string(value: str) -> int:
        size = strings.get(id(value))
        if size is None:
            size = strings[id(value)] = json_size(value)
        return size

    def metadata_size(doc_id: str, value: Any) -> int:
        known = metadata.get(doc_id)
        if known is not None and (known[0] is value or _equal(known[0], value)):
            return known[1]
        size = json_size(response_metadata(value))
        metadata[doc_id] = (value, size)
        return size

    total = batch_fixed + TOOK_MS_BYTES + max(len(results) - 1, 0) if batch else 0
    for r in results:
        rerank = 4 if r.rerank is None else len(RerankInfo(**dataclasses.asdict(r.rerank)).model_dump_json())
        total += result_fixed + float_size(r.took_ms) + rerank + max(len(r.hits) - 1, 0)
        for h in r.hits:
            total += (
                hit_fixed
                + string(h.id)
                + float_size(h.score)
                + string(h.title)
                + string(h.text)
                + metadata_size(h.id, h.metadata)
                + len(str(h.passage_id))
                + len(str(h.passage_index))
                + len(str(h.start))
                + len(str(h.end))
                + _int_size(h.ranks.get("dense"))
                + _int_size(h.ranks.get("bm25"))
                + float_size(h.rerank_score)
                + _spans_size(h.highlights)
            )
    return total
