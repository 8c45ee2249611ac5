"""The contextual document embedder: context handling, the null context, save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models import load_embedder
from models.cde import CdeModel, CorpusContext
from models.cde.embedder import CdeEmbedder

DOCS = ["graphene conducts heat well", "the pancreas secretes insulin", "a court ruled on the appeal", "tides"]
TEXTS = ["insulin resistance in mice", "thermal conductivity of carbon"]


@pytest.fixture(scope="module")
def cde(tiny_cde_dir: Path) -> CdeEmbedder:
    e = load_embedder(tiny_cde_dir)
    assert isinstance(e, CdeEmbedder)
    return e


def _context(e: CdeEmbedder, docs: list[str]) -> CorpusContext:
    return e.make_context([f"d{i}" for i in range(len(docs))], docs, corpus_documents=len(docs), seed=0)


def test_permuting_the_context_does_not_change_an_embedding(cde: CdeEmbedder) -> None:
    ctx = _context(cde, DOCS)
    perm = CorpusContext(ctx.vectors[[2, 0, 3, 1]], ctx.doc_ids, ctx.fingerprint)
    np.testing.assert_allclose(
        cde.encode_documents(TEXTS, context=ctx), cde.encode_documents(TEXTS, context=perm), atol=1e-6
    )


def test_different_contexts_give_different_embeddings(cde: CdeEmbedder) -> None:
    a = cde.encode_queries(TEXTS, context=_context(cde, DOCS))
    b = cde.encode_queries(TEXTS, context=_context(cde, ["stock markets fell", "a poem about rain"] * 2))
    assert np.abs(a - b).max() > 1e-4


def test_no_context_is_the_null_context_bi_encoder(cde: CdeEmbedder) -> None:
    plain = cde.encode_documents(TEXTS)  # context=None
    assert plain.shape == (2, cde.dim)
    np.testing.assert_allclose(np.linalg.norm(plain, axis=1), 1.0, atol=1e-5)
    model: CdeModel = cde.model
    with torch.no_grad():
        j = model.config.corpus_context_size
        rows = model.context_rows(None)  # (J, d): v_null everywhere
        assert rows.shape == (j, cde.dim)
        assert torch.equal(rows, model.null_context.expand(j, -1))
        # Sequence dropout of every row is the same as no context at all.
        ctx = torch.from_numpy(_context(cde, DOCS).vectors)
        batch = cde.tokenizer(TEXTS, padding=True, return_tensors="pt")
        dropped = model(
            batch["input_ids"], batch["attention_mask"], context=ctx, dropout_mask=torch.ones(4, dtype=torch.bool)
        )
    np.testing.assert_allclose(dropped.numpy(), plain[[0, 1]], atol=1e-5)


def test_text_embedding_ignores_padding_and_the_context_is_not_pooled(cde: CdeEmbedder) -> None:
    ctx = _context(cde, DOCS)
    alone = cde.encode_documents(TEXTS[:1], context=ctx)
    with_longer = cde.encode_documents([TEXTS[0], "a much longer text " * 10], context=ctx)
    np.testing.assert_allclose(alone[0], with_longer[0], atol=1e-5)


def test_save_then_load_gives_identical_embeddings(cde: CdeEmbedder, tmp_path: Path) -> None:
    ctx = _context(cde, DOCS)
    cde.model.save_pretrained(tmp_path)
    cde.tokenizer.save_pretrained(tmp_path)
    cde.config.save(tmp_path)
    again = load_embedder(tmp_path)
    assert isinstance(again, CdeEmbedder) and again.fingerprint == cde.fingerprint
    np.testing.assert_array_equal(again.encode_queries(TEXTS, context=ctx), cde.encode_queries(TEXTS, context=ctx))


def test_a_context_made_by_other_weights_is_refused(cde: CdeEmbedder) -> None:
    ctx = _context(cde, DOCS)
    other = CorpusContext(ctx.vectors, ctx.doc_ids, "someone-else")
    with pytest.raises(ValueError, match="other weights"):
        cde.encode_queries(TEXTS, context=other)


def test_context_files_round_trip(cde: CdeEmbedder, tmp_path: Path) -> None:
    ctx = _context(cde, DOCS)
    ctx.save(tmp_path)
    back = CorpusContext.load(tmp_path)
    assert back.id == ctx.id and back.doc_ids == ctx.doc_ids
    np.testing.assert_array_equal(back.vectors, ctx.vectors)


def test_a_plain_embedder_refuses_a_context(tiny_embedder_dir: Path, cde: CdeEmbedder) -> None:
    with pytest.raises(ValueError, match="not contextual"):
        load_embedder(tiny_embedder_dir).encode_queries(TEXTS, context=_context(cde, DOCS))
