"""`vela train revela`: batch construction, gradients through Sim, the REPLUG baseline, and 2-step end-to-end runs
on a tiny random BERT retriever and a tiny random Llama LM (both with the MiniLM tokenizer)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from models import EmbedderConfig, load_embedder
from tests.tiny_models import minilm_tokenizer, save_tiny_bert
from training.revela.arguments import RevelaArguments
from training.revela.dataset import (
    RevelaCollator,
    build_batches,
    chunk_text,
    interleave,
    read_corpus,
    split_units,
)
from training.revela.modeling import RevelaModel, load_lm, load_retriever, unwrap
from training.revela.replug import ReplugCollator, ReplugModel, off_diagonal

TOPICS = [
    ["insulin", "glucose", "blood", "pancreas", "diabetes", "dose", "patients", "levels"],
    ["river", "valley", "water", "flood", "bridge", "rain", "stream", "banks"],
    ["compiler", "parser", "token", "syntax", "grammar", "code", "errors", "lexer"],
    ["violin", "orchestra", "concert", "melody", "strings", "tempo", "music", "score"],
]


def _sentence(topic: int, rng: random.Random) -> str:
    words = [rng.choice(TOPICS[topic]) for _ in range(rng.randint(3, 14))]
    return " ".join(words).capitalize() + rng.choice([".", "!", "?"])


def _documents(n: int, sentences: int = 12, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [
        {"_id": str(d), "title": f"Topic {d}", "text": " ".join(_sentence(d % 4, rng) for _ in range(sentences))}
        for d in range(n)
    ]


def _write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(d) for d in docs))
    return path


def save_tiny_llama(root: Path) -> Path:
    """A random 2-layer Llama (hidden 32, grouped-query attention) with the MiniLM tokenizer and its vocabulary."""
    tok = minilm_tokenizer()
    config = LlamaConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(root)
    tok.save_pretrained(root)
    return root


def test_chunks_are_whole_sentences_of_at_most_n_words() -> None:
    doc = _documents(1, sentences=40)[0]
    long_sentence = "Word " * 30 + "end."  # 31 words
    text = f"{doc['title']}\n{doc['text']} {long_sentence}"
    units = split_units(text, "natural")  # the title line, then the sentences
    assert units[-1] == long_sentence.strip() and all(u[-1] in ".!?" for u in units[1:])

    def contiguous_units(chunk: str) -> bool:
        return any(" ".join(units[a:b]) == chunk for a in range(len(units)) for b in range(a + 1, len(units) + 1))

    for n in (10, 20, 120):
        chunks = chunk_text(text, n)
        assert chunks and all(len(c.split()) <= n for c in chunks)
        assert all(contiguous_units(c) for c in chunks)  # whole sentences, in order, none cut
        assert any(long_sentence.strip() in c for c in chunks) == (n >= 31)  # too long for N: left out, not cut
    assert " ".join(chunk_text(text, 120)).split() == text.split()  # nothing lost when every sentence fits


def test_code_chunks_keep_whole_lines() -> None:
    code = "def f(x):\n    if x > 1:\n        return x * 2\n    return 0\n\nclass A:\n    pass\n"
    chunks = chunk_text(code, 6, kind="code")
    lines = [line for line in code.splitlines() if line.strip()]
    assert chunks and all(len(c.split()) <= 6 for c in chunks)
    assert all(line in lines for c in chunks for line in c.split("\n"))  # indentation kept, no line cut


def test_batches_interleave_a_few_documents_and_shuffle_within() -> None:
    assert interleave([[0, 1, 2], [3, 4], [5]]) == [0, 3, 5, 1, 4, 2]
    docs = [f"{d['title']}\n{d['text']}" for d in _documents(12, sentences=20)]
    data = build_batches(docs, batch_size=8, max_words=30, docs_per_group=2, seed=0)
    assert data.batches and all(len(b) == 8 for b in data.batches)
    used = [c for b in data.batches for c in b]
    assert len(set(used)) == len(used)  # no chunk twice
    for batch in data.batches:  # a few documents: one group, or the tail of one and the head of the next
        assert 1 <= len({data.doc_of[c] for c in batch}) <= 4
    # The first batch is the start of group (doc 0, doc 1) interleaved, d01 d11 d02 d12 ..., then shuffled.
    first = data.batches[0]
    assert [data.doc_of[c] for c in sorted(first)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert first != sorted(first)
    capped = build_batches(docs, batch_size=8, max_words=30, docs_per_group=2, max_batches=2, seed=0)
    assert len(capped.batches) == 2


def test_corpus_from_jsonl_beir_and_an_ingested_collection(tmp_path: Path) -> None:
    from indexing.docstore import DocStore, StoredDocument

    docs = _documents(3)
    _write_jsonl(tmp_path / "c.jsonl", docs)
    (tmp_path / "beir").mkdir()
    _write_jsonl(tmp_path / "beir" / "corpus.jsonl", docs)
    expected = [f"{d['title']}\n{d['text']}" for d in docs]
    assert read_corpus(str(tmp_path / "c.jsonl")) == expected
    assert read_corpus(str(tmp_path / "beir"), max_docs=2) == expected[:2]
    (tmp_path / "coll").mkdir()
    store = DocStore(tmp_path / "coll" / "docs.sqlite3")
    store.upsert(
        StoredDocument(d["_id"], d["title"], d["text"], {}, "h", [(0, 5)], np.zeros((1, 4), np.float32)) for d in docs
    )
    store.close()
    assert read_corpus(str(tmp_path / "coll")) == expected


def _batch(args: RevelaArguments, collator_cls: type = RevelaCollator) -> tuple:
    retriever, rtok, emb = load_retriever(args)
    lm, ltok = load_lm(args)
    collator = collator_cls(
        rtok, ltok, query_prefix="Query: ", document_prefix="Passage: ", sim_text=args.sim_text,
        max_length=48, lm_max_length=32,
    )  # fmt: skip
    docs = [f"{d['title']}\n{d['text']}" for d in _documents(4, sentences=8)]
    data = build_batches(docs, batch_size=6, max_words=20, seed=0)
    items = [{"text": data.chunks[c], "doc": data.doc_of[c]} for c in data.batches[0]]
    return retriever, lm, collator(items)


def _args(tmp_path: Path, **kw: object) -> RevelaArguments:
    bert = tmp_path / "bert"
    if not bert.exists():
        save_tiny_bert(bert, layers=2, embedder=EmbedderConfig(pooling="mean", max_length=64))
    lm = tmp_path / "llama"
    if not lm.exists():
        save_tiny_llama(lm)
    return RevelaArguments(model=str(bert), lm=str(lm), corpus=["unused"], **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("checkpointing", [False, True])
def test_gradients_reach_the_retriever_lora_weights_through_sim(tmp_path: Path, checkpointing: bool) -> None:
    torch.manual_seed(0)
    args = _args(tmp_path, lora_r=4, lm_lora_r=4, temperature=0.05)
    retriever, lm, inputs = _batch(args)
    assert "doc_input_ids" in inputs  # "Query: " half vs "Passage: " whole chunk: two retriever passes
    model = RevelaModel(retriever, lm, temperature=args.temperature)
    if checkpointing:  # as `--activation_checkpointing` does: the in-batch keywords reach checkpointed layers
        model.train().activation_checkpointing_enable()
        assert (
            unwrap(model.lm).is_activation_checkpointing
            and unwrap(model.retriever.backbone).is_activation_checkpointing
        )
    out = model(**inputs)
    assert torch.allclose(out.sim.diagonal(), torch.zeros(6)) and torch.allclose(out.sim.sum(-1), torch.ones(6))
    out.loss.backward()
    # (the pooler's LoRA gets none: mean pooling never reads it)
    lora_b = {n: p.grad for n, p in model.retriever.named_parameters() if "lora_B" in n and "pooler" not in n}
    assert lora_b and all(g is not None and torch.isfinite(g).all() for g in lora_b.values())
    assert sum(float(g.abs().sum()) for g in lora_b.values()) > 0  # the NTP loss moved the retriever, via Sim only
    frozen = [p for n, p in model.retriever.named_parameters() if "lora_" not in n]
    assert all(not p.requires_grad for p in frozen)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in model.lm.named_parameters() if "lora_B" in n)


def test_replug_distils_the_frozen_lm_into_the_retriever(tmp_path: Path) -> None:
    x = torch.arange(16.0).view(4, 4)
    assert off_diagonal(x).tolist() == [[1, 2, 3], [4, 6, 7], [8, 9, 11], [12, 13, 14]]
    torch.manual_seed(0)
    args = _args(tmp_path, method="replug", temperature=0.05, lm_temperature=0.1)
    retriever, lm, inputs = _batch(args, ReplugCollator)
    b = inputs["lm_input_ids"].shape[0]
    assert inputs["pair_input_ids"].shape[0] == b * (b - 1)
    targets = (inputs["pair_labels"] != -100).sum(-1)
    assert (targets > 0).all() and (targets < inputs["pair_attention_mask"].sum(-1)).all()  # scored on D_i only
    model = ReplugModel(retriever, lm, temperature=0.05, lm_temperature=0.1, pairs_per_pass=8).train()
    assert not model.lm.training
    out = model(**inputs)
    assert out.loss >= 0 and torch.allclose(out.sim.sum(-1), torch.ones(b))
    out.loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.retriever.parameters())
    assert all(p.grad is None for p in model.lm.parameters())  # the LM stays frozen


@pytest.mark.parametrize("method", ["revela", "replug"])
def test_two_steps_end_to_end_write_a_loadable_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    from training.revela.cli import main

    args = _args(tmp_path)
    corpus = _write_jsonl(tmp_path / "corpus.jsonl", _documents(8, sentences=10))
    out = tmp_path / "out"
    argv = [
        "--out", str(out), "--method", method, "--model", args.model, "--lm", args.lm, "--corpus", str(corpus),
        "--batch_size", "4", "--chunk_words", "30", "--max_steps", "2", "--warmup_steps", "0", "--logging_steps", "1",
        "--lora_r", "4", "--lm_lora_r", "4", "--max_length", "48", "--lm_max_length", "40",
        "--query_prefix", "Query: ", "--document_prefix", "Passage: ", "--save_lm", "true",
    ]  # fmt: skip
    monkeypatch.setattr("sys.argv", ["vela train revela", *argv])
    assert main(argv) == 0
    record = json.loads((out / "training_args.json").read_text())
    assert record["steps"] == 2 and record["recipe_args"]["method"] == method and record["machine"]["cpu"]["model"]
    assert record["training_args"]["learning_rate"] == (1e-4 if method == "revela" else 5e-4)
    assert any("sim_max" in h for h in record["log_history"])
    assert not any(re.search("lora", p.name) for p in out.iterdir())  # merged: a plain encoder directory
    emb = load_embedder(out)
    assert emb.config.query_prefix == "Query: " and emb.config.document_prefix == "Passage: "
    vec = emb.encode_documents(["insulin lowers glucose"])
    assert vec.shape == (1, 32) and np.isclose(np.linalg.norm(vec), 1.0, atol=1e-5)
    if method == "revela":  # the LM, merged, loads as an ordinary causal LM
        assert "revela" not in (out / "lm" / "config.json").read_text()  # loads without our attention registered
        assert AutoModelForCausalLM.from_pretrained(out / "lm").config.model_type == "llama"
