"""InfoNCE, and two-stage gradient caching for CDE: the same loss and gradients as the plain step."""

from __future__ import annotations

from pathlib import Path

import torch

from models.cde import CdeModel
from training.cde.trainer import cached_step, context_subset
from training.losses.infonce import InfoNCELoss


def test_infonce_excluding_a_candidate_equals_dropping_it() -> None:
    torch.manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(3, 8), dim=-1)
    d = torch.nn.functional.normalize(torch.randn(3, 8), dim=-1)
    loss = InfoNCELoss(0.05)
    exclude = torch.zeros(3, 3, dtype=torch.bool)
    exclude[0, 2] = True
    masked = loss(q, d, exclude)
    s = q @ d.T / 0.05
    rows = [
        torch.logsumexp(s[0, :2], 0) - s[0, 0],
        torch.logsumexp(s[1], 0) - s[1, 1],
        torch.logsumexp(s[2], 0) - s[2, 2],
    ]
    torch.testing.assert_close(masked, torch.stack(rows).mean())


def _batch(tok, texts: list[str]) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    b = tok(texts, padding=True, return_tensors="pt")
    return {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}


def test_two_stage_gradient_cache_equals_the_plain_step(tiny_cde_dir: Path) -> None:
    from transformers import AutoTokenizer

    model = CdeModel.from_pretrained(tiny_cde_dir)
    model.train()
    # Hidden dropout off: a chunked forward draws other masks than a whole-batch one (the cached step replays
    # its own masks between its passes, so its gradients are right for the masks it drew). Sequence dropout
    # stays on through an explicit mask.
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    tok = AutoTokenizer.from_pretrained(tiny_cde_dir)
    queries = _batch(tok, [f"query number {i} about topic {i % 2}" for i in range(6)])
    docs = _batch(tok, [f"document {i} " + "with words " * (i + 1) for i in range(6)])
    exclude = torch.zeros(6, 6, dtype=torch.bool)
    exclude[0, 3] = True
    loss_fn = InfoNCELoss(0.05).compute_loss_from_embeddings
    sel = context_subset(6, model.config.corpus_context_size, torch.Generator().manual_seed(0))
    ctx_inputs = {k: v[sel] for k, v in docs.items()}
    drop = torch.tensor([True, False, False, True])

    torch.manual_seed(123)
    context = model.embed_context(**ctx_inputs)
    q = model(**queries, context=context, dropout_mask=drop)
    d = model(**docs, context=context, dropout_mask=drop)
    plain = loss_fn(q, d, exclude)
    plain.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    torch.manual_seed(123)
    cached = cached_step(
        model,
        {"queries": queries, "documents": docs, "exclude": exclude},
        loss_fn,
        2,
        context_inputs=(ctx_inputs, drop),
    )
    torch.testing.assert_close(cached, plain.detach())
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert set(got) == set(want)
    assert any(n.startswith("first_stage") for n in got) and "null_context" in got
    for n in want:
        torch.testing.assert_close(got[n], want[n], atol=2e-5, rtol=1e-4, msg=n)
