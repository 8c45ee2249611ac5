"""SIGKILL a writing process at random points of its commits and merges: after each kill the collection
opens and serves its last published state; after the writer runs again, every document is there exactly
once and no file is left that no manifest names."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from indexing.manifest import CURRENT, KEEP_MANIFESTS, current_version, manifest_path, read_manifest, referenced
from indexing.store import CollectionStore

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 6


def _writer(data: Path, shards: int) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "tests.indexing.crash_writer", str(data), str(shards), str(ROUNDS)]
    return subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )


def _serves(data: Path) -> None:
    """Opens from disk as a fresh process would, and answers every mode over the published state."""
    store = CollectionStore(data)
    if not store.exists("c"):
        return  # killed before the collection was created: nothing was ever published
    coll = store.get("c")
    for shard in coll.shard_list:
        view = shard.view()
        live = np.concatenate([p.seg.pids[p.live] for p in view.parts]) if view.parts else np.empty(0)
        assert len(np.unique(live)) == len(live)  # no passage twice among live rows
    coll.close()


def _orphans(directory: Path) -> set[str]:
    version = current_version(directory)
    assert version is not None
    keep = {CURRENT, "publish.lock", "merge.lock"}
    for v in range(max(1, version - KEEP_MANIFESTS + 1), version + 1):
        keep |= referenced(read_manifest(directory, v)) | {manifest_path(directory, v).name}
    return {p.name for p in directory.iterdir()} - keep


def kill_loop(tmp_path: Path, kills: int, shards: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data"
    for _ in range(kills):
        proc = _writer(data, shards)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        _serves(data)
    proc = _writer(data, shards)  # the job run again, to its end
    assert proc.wait(300) == 0
    coll = CollectionStore(data).get("c")
    coll.check_consistency()
    ids = {d for s in coll.shard_list for d in s.docstore.document_ids()}
    want = {f"d{r}-{i}" for r in range(ROUNDS) for i in range(40)} - {
        f"d{max(r - 2, 0)}-{i}" for r in range(ROUNDS) for i in range(35, 40)
    }
    assert ids == want
    for shard in coll.shard_list:
        view = shard.view()
        live = np.concatenate([p.seg.pids[p.live] for p in view.parts])
        stored = {int(p) for pids, _, _ in shard.docstore.iter_passages() for p in pids}
        assert sorted(live.tolist()) == sorted(stored)  # every passage exactly once, nothing dead served
        assert not _orphans(shard.segments_dir)


# 3 shards: `make test-slow` (the default suite stays under 15 minutes)
@pytest.mark.parametrize("shards", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_sigkill_during_commits_and_merges(tmp_path: Path, shards: int) -> None:
    kill_loop(tmp_path, kills=2, shards=shards, seed=shards)  # 50 kills: the slow test below


@pytest.mark.slow
def test_sigkill_at_fifty_random_points(tmp_path: Path) -> None:
    kill_loop(tmp_path, kills=50, shards=3, seed=7)
