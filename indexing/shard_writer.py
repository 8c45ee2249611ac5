"""Writing one shard's segments: a commit adds what changed since the last one; merges run in the background.

A commit (the caller holds the collection's writer lock) builds one segment of the passages added since the
last manifest (passage ids only grow, so they are the ids above its `max_pid`), marks the passages deleted or
replaced since then (the doc store's `dead_passages`, filled by a trigger) in the deletion bitmaps of the
segments that hold them, and publishes the next manifest. Its cost follows what it adds, not the shard size.

A merge (indexing/merge_policy.py picks which) rewrites some segments' live rows as one segment, from the
segments themselves (vectors from FAISS storage, postings remapped): no doc store reads, and no writer lock.
Deletions that arrived while it ran are carried over to the merged segment when it publishes.
Both publish under `publish.lock`, so they never lose each other's manifest.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from indexing.bm25 import tokenize
from indexing.dense import DenseIndexParams
from indexing.docstore import DocStore
from indexing.manifest import collect_garbage, current_manifest, load_dead, publish, save_dead
from indexing.merge_policy import TieredMergePolicy
from indexing.postings import Postings
from indexing.segment import Segment, SegmentBuilder
from models.cde.context import CorpusContext
from velaio.files import file_lock, load_npy, try_file_lock

log = logging.getLogger("vela.segments")
_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


def _thread_lock(key: str) -> threading.Lock:
    with _thread_locks_guard:
        return _thread_locks.setdefault(key, threading.Lock())


class ShardWriter:
    def __init__(self, directory: Path, *, dim: int, small_dim: int, dense: DenseIndexParams, extra: dict[str, Any]):
        self.dir = directory
        self.dim, self.small_dim, self.dense = dim, min(small_dim, dim), dense
        self.extra = extra  # recorded in every manifest (bm25 params, embedder)
        self.min_token_chars = int(extra.get("bm25", {}).get("min_token_chars", 2))  # the collection's terms
        self.normalize = str(extra.get("bm25", {}).get("normalize", "none"))

    @contextmanager
    def _publishing(self) -> Iterator[None]:
        """One publisher at a time: threads of this process, and other processes."""
        self.dir.mkdir(exist_ok=True)  # not its parents: a collection deleted meanwhile is not made again
        with _thread_lock(str(self.dir)), file_lock(self.dir / "publish.lock"):
            yield

    def _base(self) -> dict[str, Any]:
        return {"dim": self.dim, "small_dim": self.small_dim, "dense_index": self.dense.to_json(), **self.extra}

    # --- commit ----------------------------------------------------------------------------------
    def commit(self, docstore: DocStore, context: CorpusContext | None = None, *, rebuild: bool = False) -> int:
        """Publish the doc store's state; returns the manifest version. Rebuilds every segment when asked,
        when there is no manifest yet, or when the vectors were re-made with another corpus context."""
        with self._publishing():
            m = current_manifest(self.dir)
            seq = docstore.seq()  # read first: the manifest reflects at least this state
            ctx_id = context.id if context is not None else None
            if rebuild or m is None or m.get("context") != ctx_id:
                return self._rebuild(docstore, context, seq)
            dead = docstore.dead_pids()
            segments = self._mark_dead([dict(e) for e in m["segments"]], dead, int(m["version"]) + 1)
            added = self._new_segment(docstore, int(m["max_pid"]))
            if added is not None:
                segments.append(added)
            max_pid = max([int(m["max_pid"])] + [int(e["max_pid"]) for e in segments if e["rows"]])
            version = publish(
                self.dir,
                {
                    **self._base(),
                    "seq": seq,
                    "max_pid": max_pid,
                    "context": ctx_id,
                    "segments": segments,
                    "created_at": time.time(),
                },
            )
            docstore.forget_dead(dead)  # after publishing: a crash before this only marks them again
            return version

    def _rebuild(self, docstore: DocStore, context: CorpusContext | None, seq: int) -> int:
        dead = docstore.dead_pids()
        added = self._new_segment(docstore, -1)
        if context is not None:
            ctx_dir = self.dir / f"ctx-{context.id}"
            if not ctx_dir.exists():
                context.save(ctx_dir)
        version = publish(
            self.dir,
            {
                **self._base(),
                "seq": seq,
                "max_pid": int(added["max_pid"]) if added and added["rows"] else 0,
                "context": context.id if context is not None else None,
                "segments": [added] if added is not None else [],
                "created_at": time.time(),
            },
        )
        docstore.forget_dead(dead)
        return version

    def _new_segment(self, docstore: DocStore, after: int) -> dict[str, Any] | None:
        rows = docstore.count_after(after)
        if rows == 0:
            return None
        builder = SegmentBuilder(rows=rows, dim=self.dim, small_dim=self.small_dim, dense=self.dense)
        for batch in docstore.batches_after(after):
            builder.add(
                batch.pids,
                batch.docs,
                batch.embeddings,
                tokenize(batch.texts, min_chars=self.min_token_chars, normalize=self.normalize),
                batch.metadata,
            )
        name = builder.finish(self.dir)
        pids = np.concatenate(builder.pids)
        return {"name": name, "rows": int(pids.shape[0]), "dead": 0, "deletes": None, "max_pid": int(pids[-1])}

    def _mark_dead(self, segments: list[dict[str, Any]], dead: np.ndarray, version: int) -> list[dict[str, Any]]:
        """Each segment entry with the passages in `dead` marked deleted (a new bitmap file where one changes)."""
        if not dead.size:
            return segments
        dead = np.sort(dead)
        for e in segments:
            pids = load_npy(self.dir / e["name"] / "pids.npy", mmap_mode="r")  # (rows,) ascending
            mask = load_dead(self.dir, e)
            hit = np.isin(pids, dead, assume_unique=True) & ~mask
            if hit.any():
                mask |= hit
                e["deletes"] = save_dead(self.dir, e["name"], version, mask)
                e["dead"] = int(mask.sum())
        return segments

    # --- merge -----------------------------------------------------------------------------------
    def merge(self, policy: TieredMergePolicy | None = None) -> bool:
        """Merge once if the policy finds segments to merge; False when there is nothing to do or another
        merge runs on this shard. Safe to kill at any point (the next commit removes what it left)."""
        policy = policy or TieredMergePolicy()
        self.dir.mkdir(exist_ok=True)
        with try_file_lock(self.dir / "merge.lock") as ours:
            if not ours:
                return False
            # The manifest and its deletion files are read as one publisher would, so that no commit (of this
            # process or another) removes a deletion file between the two; later deletions reach the merged
            # segment when it is published.
            with self._publishing():
                m = current_manifest(self.dir)
                picked = policy.pick(m["segments"]) if m else []
                if not picked or m is None:
                    return False
                entries = {e["name"]: e for e in m["segments"]}
                dead = {name: load_dead(self.dir, entries[name]) for name in picked}  # (rows,) bool each
            work = self.dir / f"merging-{uuid.uuid4().hex[:12]}"
            try:
                work.mkdir()
                entry = self._build_merged(picked, dead, work)
                return self._publish_merge(picked, entry, work)
            finally:
                shutil.rmtree(work, ignore_errors=True)

    def _build_merged(self, picked: list[str], dead: dict[str, np.ndarray], work: Path) -> dict[str, Any]:
        parts = []  # (segment, live rows)
        for name in picked:
            seg = Segment.load(self.dir / name)
            parts.append((seg, np.flatnonzero(~dead[name])))
        pids = np.concatenate([s.pids[r] for s, r in parts])  # (n,)
        order = np.argsort(pids, kind="stable")  # merged rows in passage-id order
        new_row = np.empty_like(order)
        new_row[order] = np.arange(order.shape[0])
        vocab: dict[str, int] = {}
        terms_l, rows_l, tf_l, lengths_l = [], [], [], []
        offset = 0
        for seg, rows in parts:
            terms, term_of, row_of, tf = seg.postings.select(rows)
            remap = np.fromiter((vocab.setdefault(t, len(vocab)) for t in terms), np.int64, count=len(terms))
            terms_l.append(remap[term_of] if len(terms) else term_of)
            rows_l.append(new_row[row_of + offset])
            tf_l.append(tf)
            lengths_l.append(np.asarray(seg.postings.lengths)[rows])
            offset += rows.shape[0]
        lengths = np.concatenate(lengths_l)[order]
        postings = Postings.from_triples(
            sorted(vocab, key=vocab.__getitem__),
            np.concatenate(terms_l),
            np.concatenate(rows_l),
            np.concatenate(tf_l),
            lengths,
        )
        builder = SegmentBuilder(rows=int(pids.shape[0]), dim=self.dim, small_dim=self.small_dim, dense=self.dense)
        vectors = np.concatenate([s.vectors(r) for s, r in parts])[order]  # (n, d)
        docs = np.concatenate([s.docs[r] for s, r in parts])[order]
        metadata = [json.dumps(md) for s, r in parts for md in (s.payload.metadata[i] for i in r.tolist())]
        builder.add(pids[order], docs, vectors, None, [metadata[i] for i in order.tolist()])
        name = builder.finish(work, postings)
        return {
            "name": name,
            "rows": int(pids.shape[0]),
            "dead": 0,
            "deletes": None,
            "max_pid": int(pids.max()) if pids.size else 0,
        }

    def _publish_merge(self, picked: list[str], entry: dict[str, Any], work: Path) -> bool:
        with self._publishing():
            m = current_manifest(self.dir)
            names = {e["name"] for e in m["segments"]} if m else set()
            if m is None or not set(picked) <= names:
                return False  # a rebuild replaced them meanwhile: this merge is moot
            # Passages deleted from the sources while the merge ran are deleted in the merged segment too.
            gone = [
                load_npy(self.dir / e["name"] / "pids.npy", mmap_mode="r")[load_dead(self.dir, e)]
                for e in m["segments"]
                if e["name"] in picked
            ]
            os.replace(work / entry["name"], self.dir / entry["name"])
            segments = [e for e in m["segments"] if e["name"] not in picked]
            segments.append(
                self._mark_dead(
                    [entry], np.concatenate(gone) if gone else np.empty(0, np.int64), int(m["version"]) + 1
                )[0]
            )
            publish(self.dir, {**m, "segments": segments, "created_at": time.time()})
            log.info("segments merged", extra={"shard": str(self.dir), "merged": picked, "rows": entry["rows"]})
            return True

    def clean(self) -> list[str]:
        """Remove files no recent manifest names (after a crash)."""
        with self._publishing():
            return collect_garbage(self.dir) if self.dir.exists() else []
