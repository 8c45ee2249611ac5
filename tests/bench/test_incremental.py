"""bench.incremental on a tiny scale: served commits become searchable, the rebuild runs, the 1M part's code runs."""

from __future__ import annotations

import json
from pathlib import Path

from bench.incremental import main


def test_incremental_smoke(tmp_path: Path, beir_dir: Path, tiny_embedder_dir: Path) -> None:
    out = tmp_path / "incremental.json"
    tiny = str(tiny_embedder_dir)
    args = ["--passages", "100", "--commits", "3", "--batch", "5", "--rebuilds", "1", "--embedder", tiny]
    main([*args, "--flat-passages", "500", "--flat-commits", "1", "--flat-embedder", tiny, "--out", str(out)])
    result = json.loads(out.read_text())
    served = result["served"]
    assert served["commits"] == 3 and len(served["each_ms"]) == 3
    assert served["segments_after_each_commit"][0] == 2  # the base segment and the new one
    assert result["full_rebuild"]["passages"] == 115 and result["full_rebuild"]["segments_after"] == 1
    assert result["flat"]["found_by_search"] == [True]
    assert result["ratio_rebuild_over_incremental"]["vs_p50"] > 0
    assert result["command"] and result["machine"]["cpus"]
