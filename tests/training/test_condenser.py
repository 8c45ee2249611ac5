"""`vela train condenser` end to end on a tiny BERT: MLM loss falls; the output is a plain embedder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel

from cli.main import main as vela
from models import load_embedder
from tests.tiny_models import save_tiny_bert


def test_pretraining_lowers_mlm_loss_and_saves_a_plain_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    src = save_tiny_bert(tmp_path / "bert", layers=2)
    words = ["insulin", "glucose", "blood", "cell", "study", "found", "levels", "patients", "trial", "dose"]
    docs = [{"_id": str(i), "title": "", "text": " ".join(words[(i + j) % 10] for j in range(40))} for i in range(60)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in docs))
    out = tmp_path / "out"
    argv = [
        "train", "condenser", "--out", str(out), "--model", str(src), "--corpus", str(corpus),
        "--max_length", "32", "--max_steps", "15", "--learning_rate", "3e-3", "--warmup_steps", "0",
        "--per_device_train_batch_size", "16", "--eval_fraction", "0.1", "--pooling", "cls", "--logging_steps", "5",
    ]  # fmt: skip
    monkeypatch.setattr("sys.argv", ["vela", *argv])
    assert vela(argv) == 0
    record = json.loads((out / "training_args.json").read_text())
    assert record["command"].startswith("vela train condenser --out") and record["steps"] == 15
    assert record["machine"]["cpu"]["model"]
    before, after = record["held_out_mlm_loss"]["before"], record["held_out_mlm_loss"]["after"]
    assert after["head_mlm_loss"] < before["head_mlm_loss"] - 1.0
    assert after["backbone_mlm_loss"] < before["backbone_mlm_loss"] - 1.0
    assert any("head_mlm_loss" in h for h in record["log_history"])
    # The head is gone: a BERT encoder with the source's shape, loadable as an embedder in one call.
    saved = AutoModel.from_pretrained(out)
    assert type(saved).__name__ == "BertModel" and saved.config.num_hidden_layers == 2
    assert not any("head" in k for k in saved.state_dict())
    emb = load_embedder(out)
    assert emb.config.pooling == "cls"
    vec = emb.encode_documents(["insulin lowers glucose"])
    assert vec.shape == (1, 32) and np.isclose(np.linalg.norm(vec), 1.0, atol=1e-5)
