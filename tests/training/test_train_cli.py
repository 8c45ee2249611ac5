"""`vela train contrastive|cde` end to end on tiny models: the output loads with one call and records its args."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli.main import main as vela
from models import load_embedder
from models.cde.embedder import CdeEmbedder
from tests.tiny_models import write_topic_corpus


@pytest.mark.parametrize("recipe", ["contrastive", "cde"])
def test_train_writes_an_embedder_that_loads_in_one_call(
    recipe: str, tmp_path: Path, tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = write_topic_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    config = tmp_path / "recipe.json"
    config.write_text(json.dumps({"batch_size": 8, "max_steps": 2, "learning_rate": 1e-4}))
    argv = [
        "train", recipe, "--out", str(out), "--config", str(config),
        "--model", str(tiny_embedder_dir), "--surrogate", str(tiny_embedder_dir),
        "--pairs", f"mine:{corpus}", "--doc_max_length", "32", "--logging_steps", "1", "--batch_size", "6",
    ]  # fmt: skip
    if recipe == "cde":
        argv += ["--corpus_context_size", "4", "--grad_cache", "true", "--grad_cache_chunk", "4"]
    monkeypatch.setattr("sys.argv", ["vela", *argv])
    assert vela(argv) == 0
    record = json.loads((out / "training_args.json").read_text())
    assert record["steps"] == 2 and record["recipe_args"]["batch_size"] == 6  # the flag beats the config file
    assert record["command"].startswith(f"vela train {recipe} --out") and record["pairs"] == 48
    assert record["machine"]["cpu"]["model"] and record["machine"]["cpus"] >= 1  # the CPU the figures came from
    emb = load_embedder(out)
    assert isinstance(emb, CdeEmbedder) == (recipe == "cde")
    vecs = emb.encode_documents(["insulin study"])
    assert vecs.shape == (1, 32) and np.isclose(np.linalg.norm(vecs), 1.0, atol=1e-5)
