"""Revela's training batches from raw text (paper Sec. 4.1): whole-sentence chunks, interleaved across documents.

A document is cut into chunks of at most N words, each made of whole sentences (code: whole lines). The
chunks of a few consecutive documents are interleaved, d11 d21 .. dn1 d12 d22 .., and the stream is cut into
batches of B, so one batch holds related chunks of a few documents: the in-batch attention has something
relevant to find, and something irrelevant to learn to ignore. Chunks are shuffled within their batch.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from training.data.pairs import SENTENCE_END, read_documents


def split_units(text: str, kind: str) -> list[str]:
    """The units a chunk is made of: sentences (a title line is its own unit) or, for code, non-empty lines."""
    if kind == "code":
        return [line.rstrip() for line in text.splitlines() if line.strip()]  # indentation kept
    units: list[str] = []
    for line in text.splitlines():
        units += [s.strip() for s in SENTENCE_END.split(line.strip()) if s.strip()]
    return units


def chunk_text(text: str, max_words: int, *, kind: str = "natural", min_words: int = 1) -> list[str]:
    """Greedy packing of whole units into chunks of <= max_words words. A unit longer than max_words fits no
    chunk: it is dropped and the next chunk starts after it, so a chunk is always contiguous text."""
    joiner = "\n" if kind == "code" else " "
    chunks: list[str] = []
    current: list[str] = []
    words = 0

    def flush() -> None:
        nonlocal current, words
        if current and words >= min_words:
            chunks.append(joiner.join(current))
        current, words = [], 0

    for unit in split_units(text, kind):
        n = len(unit.split())
        if n > max_words:
            flush()
            continue
        if words + n > max_words:
            flush()
        current.append(unit)
        words += n
    flush()
    return chunks


def read_corpus(source: str, *, max_docs: int = 0) -> list[str]:
    """Document texts (title line, then body) of a BEIR folder, a JSONL file, or a collection ingested in the
    service (its folder or its docs.sqlite3)."""
    path = Path(source)
    store = path / "docs.sqlite3" if path.is_dir() else path
    if store.suffix == ".sqlite3" and store.exists():
        from indexing.docstore import DocStore

        docstore = DocStore(store)
        try:
            ids = docstore.document_ids()[: max_docs or None]
            texts = docstore.document_texts(ids)
        finally:
            docstore.close()
        return [texts[i] for i in ids if i in texts]
    docs = list(read_documents(path).values())[: max_docs or None]
    return [f"{title}\n{text}" if title else text for title, text in docs]


def interleave(doc_chunks: list[list[int]]) -> list[int]:
    """Round-robin over documents: first chunks of all, then second chunks, ... (d11 d21 .. dn1 d12 ..)."""
    longest = max((len(c) for c in doc_chunks), default=0)
    return [chunks[k] for k in range(longest) for chunks in doc_chunks if k < len(chunks)]


def group_documents(doc_chunks: list[list[int]], batch_size: int, docs_per_group: int) -> list[list[list[int]]]:
    """Consecutive documents in groups of docs_per_group, or (0) just enough documents to fill one batch."""
    groups: list[list[list[int]]] = []
    current: list[list[int]] = []
    filled = 0
    for chunks in doc_chunks:
        if not chunks:
            continue
        current.append(chunks)
        filled += len(chunks)
        if (docs_per_group and len(current) >= docs_per_group) or (not docs_per_group and filled >= batch_size):
            groups.append(current)
            current, filled = [], 0
    if current:
        groups.append(current)
    return groups


@dataclass
class ChunkBatches:
    chunks: list[str]  # every chunk's text
    doc_of: list[int]  # the document each chunk came from
    batches: list[list[int]]  # chunk indices, B per batch, shuffled within the batch


def build_batches(
    documents: list[str],
    *,
    batch_size: int,
    max_words: int,
    kind: str = "natural",
    min_words: int = 1,
    docs_per_group: int = 0,
    max_batches: int = 0,
    seed: int = 0,
) -> ChunkBatches:
    chunks: list[str] = []
    doc_of: list[int] = []
    doc_chunks: list[list[int]] = []
    for d, text in enumerate(documents):
        pieces = chunk_text(text, max_words, kind=kind, min_words=min_words)
        doc_chunks.append(list(range(len(chunks), len(chunks) + len(pieces))))
        chunks += pieces
        doc_of += [d] * len(pieces)
    stream = [c for group in group_documents(doc_chunks, batch_size, docs_per_group) for c in interleave(group)]
    rng = random.Random(seed)
    batches = [stream[s : s + batch_size] for s in range(0, len(stream) - batch_size + 1, batch_size)]
    if max_batches and len(batches) > max_batches:
        batches = [batches[i] for i in sorted(rng.sample(range(len(batches)), max_batches))]
    for batch in batches:
        rng.shuffle(batch)
    if not batches:
        raise ValueError(f"{len(chunks)} chunks do not fill one batch of {batch_size}")
    return ChunkBatches(chunks, doc_of, batches)


class ChunkDataset(torch.utils.data.Dataset[dict]):
    def __init__(self, data: ChunkBatches) -> None:
        self.data = data

    def __len__(self) -> int:
        return len(self.data.chunks)

    def __getitem__(self, i: int) -> dict:
        return {"text": self.data.chunks[i], "doc": self.data.doc_of[i]}


class BatchOrder(torch.utils.data.Sampler[list[int]]):
    """The batch sampler: whole prepared batches (never re-mixed), in a seeded order drawn anew each epoch."""

    def __init__(self, batches: list[list[int]], seed: int) -> None:
        self.batches = batches
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.batches)

    def set_epoch(self, epoch: int) -> None:
        """The Trainer names the epoch: a run resumed in epoch 2 gets that epoch's order, not the first's."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.batches)))
        random.Random(self.seed + self.epoch).shuffle(order)
        self.epoch += 1
        return (self.batches[i] for i in order)


def split_half(text: str) -> tuple[str, str]:
    """(first half, second half) by words; the first half is the query side of Sim for natural language."""
    words = text.split()
    k = max(1, len(words) // 2)
    return " ".join(words[:k]), " ".join(words[k:])


def first_half(text: str) -> str:
    return split_half(text)[0]


class RevelaCollator:
    """One batch of chunks -> retriever inputs (query side, passage side) and LM inputs (right-padded)."""

    def __init__(
        self,
        retriever_tokenizer: Any,
        lm_tokenizer: Any,
        *,
        query_prefix: str,
        document_prefix: str,
        sim_text: str,
        max_length: int,
        lm_max_length: int,
    ) -> None:
        self.rtok, self.ltok = retriever_tokenizer, lm_tokenizer
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self.sim_text, self.max_length, self.lm_max_length = sim_text, max_length, lm_max_length
        if self.ltok.pad_token_id is None:  # Llama-style tokenizers: pads are masked out, any id does
            self.ltok.pad_token = self.ltok.eos_token
        self.ltok.padding_side = "right"  # the in-batch attention's masks assume right padding

    def _retriever(self, texts: list[str], name: str) -> dict[str, torch.Tensor]:
        enc = self.rtok(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        return {f"{name}_input_ids": enc["input_ids"], f"{name}_attention_mask": enc["attention_mask"]}

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        texts = [it["text"] for it in items]
        queries = [self.query_prefix + (first_half(t) if self.sim_text == "half" else t) for t in texts]
        passages = [self.document_prefix + t for t in texts]
        out = self._retriever(queries, "query")
        if passages != queries:  # the same text on both sides is embedded once
            out.update(self._retriever(passages, "doc"))
        lm = self.ltok(texts, padding=True, truncation=True, max_length=self.lm_max_length, return_tensors="pt")
        out["lm_input_ids"], out["lm_attention_mask"] = lm["input_ids"], lm["attention_mask"]  # (B, L)
        out["doc_ids"] = torch.tensor([it["doc"] for it in items])  # (B,), for the same-document diagnostic
        return out
