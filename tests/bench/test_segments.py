"""bench.segments on a tiny scale: 1 vs 10 segments give identical top-10 in every mode, latencies come back."""

from __future__ import annotations

import json
from pathlib import Path

from bench.segments import MODES, main


def test_segments_smoke(tmp_path: Path, beir_dir: Path, tiny_embedder_dir: Path) -> None:
    out = tmp_path / "segments.json"
    args = ["--beir", str(beir_dir), "--embedder", str(tiny_embedder_dir), "--limit", "100", "--rounds", "1"]
    main([*args, "--no-cache", "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["segments"] == {"one": 1, "ten": 10}
    assert result["all_equal"], result["equivalence_top10"]
    for mode in MODES:
        assert result["equivalence_top10"][mode]["identical_ids"] == 10
        assert result["latency"][mode]["ratio_p50_ten_over_one"] > 0
    assert result["command"] and result["machine"]["cpus"]
