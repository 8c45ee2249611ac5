"""The serving core's acceptance figures on full SciFact (about 10 minutes on 2 CPU cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.evaluate import evaluate


@pytest.mark.slow
def test_scifact_quality(beir_dir: Path, tmp_path: Path) -> None:
    result = evaluate(
        data=beir_dir / "scifact",
        modes=["bm25", "dense", "hybrid"],
        dim="full",
        embedder=None,
        split="test",
        workdir=tmp_path,
    )
    m = {mode: v["ndcg@10"] for mode, v in result["metrics"].items()}
    assert m["bm25"] >= 0.66 and m["dense"] >= 0.63
    assert m["hybrid"] > max(m["bm25"], m["dense"])
