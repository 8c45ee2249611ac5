"""The REPLUG baseline (paper App. A.3): distil a frozen LM's preference among in-batch chunks into the retriever.

For anchor chunk i and every other chunk j of the batch, the frozen LM scores how well D_j explains D_i,
l_ij = -log g(D_i | D_j) (mean over D_i's target tokens); P_LM(j | i) = softmax_j(-l_ij / eta) and
P_R(j | i) = softmax_j(cos(E(D_i), E(D_j)) / tau_r), both over j != i (j = i would be the LM copying D_i).
The loss is mean_i KL(P_LM(. | i) || P_R(. | i)); only the retriever trains.

With `sim_text half` (natural language, as REPLUG) the retriever's query is D_i's first half and the LM reads
[D_j ; first half of D_i] and is scored on D_i's second half; with `full` it reads [D_j] and is scored on D_i.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from training.contrastive.trainer import BiEncoder
from training.revela.dataset import RevelaCollator, split_half
from training.revela.modeling import RetrievalLMOutput, RetrieverLM, sim_metrics


def off_diagonal(x: torch.Tensor) -> torch.Tensor:
    """(B, B) -> (B, B - 1): row i without column i, the others in order (the pair order of `pair_sequences`)."""
    b = x.shape[0]
    return x.flatten()[1:].view(b - 1, b + 1)[:, :-1].reshape(b, b - 1)


def pair_sequences(
    contexts: list[list[int]], prefixes: list[list[int]], targets: list[list[int]], *, bos: int | None, pad: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every ordered pair (i, j != i), i-major: ids [bos] D_j prefix_i target_i, labels only on target_i.
    Returns input_ids, attention_mask, labels, each (B * (B - 1), L), right-padded."""
    start = [bos] if bos is not None else []
    rows: list[tuple[list[int], list[int]]] = []
    for i in range(len(targets)):
        for j in range(len(contexts)):
            if j != i:
                ids = start + contexts[j] + prefixes[i] + targets[i]
                rows.append((ids, [-100] * (len(ids) - len(targets[i])) + targets[i]))
    length = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), length), pad)  # (P, L)
    labels = torch.full((len(rows), length), -100)  # (P, L)
    mask = torch.zeros((len(rows), length), dtype=torch.long)  # (P, L)
    for r, (ids, lab) in enumerate(rows):
        input_ids[r, : len(ids)] = torch.tensor(ids)
        labels[r, : len(lab)] = torch.tensor(lab)
        mask[r, : len(ids)] = 1
    return input_ids, mask, labels


class ReplugCollator(RevelaCollator):
    """The retriever inputs of Revela, plus the B(B-1) (context, target) sequences the LM scores."""

    def __call__(self, items: list[dict]) -> dict[str, torch.Tensor]:
        out = super().__call__(items)
        texts = [it["text"] for it in items]

        def ids(batch: list[str]) -> list[list[int]]:
            enc = self.ltok(batch, add_special_tokens=False, truncation=True, max_length=self.lm_max_length)
            return [list(x) for x in enc["input_ids"]]

        if self.sim_text == "half":
            halves = [split_half(t) for t in texts]
            prefixes, targets = ids([h for h, _ in halves]), ids([tail or head for head, tail in halves])
        else:
            prefixes, targets = [[] for _ in texts], ids(texts)
        bos = self.ltok.bos_token_id
        input_ids, mask, labels = pair_sequences(ids(texts), prefixes, targets, bos=bos, pad=self.ltok.pad_token_id)
        out.update(pair_input_ids=input_ids, pair_attention_mask=mask, pair_labels=labels)
        return out


class ReplugModel(RetrieverLM):
    def __init__(
        self, retriever: BiEncoder, lm: nn.Module, *, temperature: float, lm_temperature: float, pairs_per_pass: int
    ) -> None:
        super().__init__(retriever, lm, temperature=temperature)
        self.lm_temperature = lm_temperature
        self.pairs_per_pass = pairs_per_pass

    def train(self, mode: bool = True) -> ReplugModel:
        super().train(mode)
        self.lm.eval()  # frozen: no dropout in the teacher
        return self

    @torch.no_grad()
    def pair_nll(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """-log g(target | context), mean over target tokens. (P, L) each -> (P,)."""
        out = []
        for s in range(0, len(input_ids), self.pairs_per_pass):
            sl = slice(s, s + self.pairs_per_pass)
            logits: Any = self.lm(input_ids=input_ids[sl], attention_mask=attention_mask[sl], use_cache=False).logits
            target = labels[sl, 1:]  # (p, L-1)
            tok = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), target, ignore_index=-100, reduction="none")
            out.append(tok.sum(-1) / (target != -100).sum(-1).clamp(min=1))  # (p,)
        return torch.cat(out)  # (P,)

    def forward(self, **inputs: torch.Tensor) -> RetrievalLMOutput:
        q, p = self.embed(inputs)  # (B, d), (B, d)
        b = q.shape[0]
        cos = F.normalize(q.float(), dim=-1) @ F.normalize(p.float(), dim=-1).T  # (B, B)
        log_r = off_diagonal(cos / self.temperature).log_softmax(-1)  # (B, B-1), P_R(j | i)
        nll = self.pair_nll(inputs["pair_input_ids"], inputs["pair_attention_mask"], inputs["pair_labels"])
        p_lm = (-nll.view(b, b - 1) / self.lm_temperature).softmax(-1)  # (B, B-1), P_LM(j | i)
        loss = (p_lm * (p_lm.clamp(min=1e-30).log() - log_r)).sum(-1).mean()  # mean_i KL(P_LM || P_R)
        sim = torch.zeros(b, b, device=q.device)  # (B, B): P_R back in place, zero diagonal, for the metrics
        off_diagonal_index = ~torch.eye(b, dtype=torch.bool, device=q.device)
        sim[off_diagonal_index] = log_r.exp().flatten()
        return RetrievalLMOutput(loss, sim, sim_metrics(sim, inputs.get("doc_ids")))
