"""Turning (query, document) pairs into model inputs, one layout per backbone family (RankMamba §3.1).

The trainer's collator and the serving path both go through `RerankerProcessor`, so a reranker always
reads at inference exactly what it was trained on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import BatchEncoding, PreTrainedTokenizerBase

from models.reranker.configuration_reranker import RerankerConfig


def document_text(title: str | None, text: str) -> str:
    """One string per document: the title, when there is one, on its own line before the text."""
    return f"{title}\n{text}" if title else text


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Causal LM tokenizers often have no pad token; padding is masked out, so EOS can stand in for it."""
    if tokenizer.pad_token_id is None and tokenizer.eos_token_id is not None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"  # pooling finds the last real token from the mask, either side works
    return tokenizer


class RerankerProcessor:
    """Tokenises pairs for one reranker: `[CLS] q [SEP] d [SEP]` for encoders, and for causal LMs and Mamba
    `document: {d}\\n\\nquery: {q}[EOS]`, truncated to `config.max_length` tokens (the document is cut, the
    query and [EOS] are kept). Not thread-safe (tokenizers are not): callers serialise."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, config: RerankerConfig) -> None:
        self.tokenizer = prepare_tokenizer(tokenizer)
        self.config = config
        self.max_length = int(config.max_length)
        if config.family != "encoder":
            eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
            if eos is None:
                raise ValueError("a causal or Mamba reranker needs a tokenizer with an EOS (or SEP) token")
            self.eos_id = int(eos)
            self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos)
            # Keep the BOS a Llama-style tokenizer always adds: the model never saw text without it.
            probe = tokenizer("a")["input_ids"]
            bos = tokenizer.bos_token_id
            self.lead = [int(bos)] if bos is not None and probe and probe[0] == bos else []

    def __call__(self, queries: Sequence[str], documents: Sequence[str]) -> BatchEncoding:
        if len(queries) != len(documents):
            raise ValueError(f"{len(queries)} queries for {len(documents)} documents")
        if self.config.family == "encoder":
            # longest_first cuts the document first (it is the longer side), and never fails on a long query.
            return self.tokenizer(
                list(queries),
                list(documents),
                padding=True,
                truncation="longest_first",
                max_length=self.max_length,
                return_tensors="pt",
            )
        return self._causal(queries, documents)

    def _causal(self, queries: Sequence[str], documents: Sequence[str]) -> BatchEncoding:
        tok = self.tokenizer
        doc_ids = tok([f"document: {d}" for d in documents], add_special_tokens=False)["input_ids"]
        query_ids = tok([f"\n\nquery: {q}" for q in queries], add_special_tokens=False)["input_ids"]
        room = self.max_length - len(self.lead) - 1  # tokens left for document + query once BOS/EOS are in
        rows = []
        for d, q in zip(doc_ids, query_ids, strict=True):
            q = q[: room // 2]  # a query never takes more than half: the document must be read too
            rows.append(self.lead + d[: room - len(q)] + q + [self.eos_id])
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)  # (B, L)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, L)
        for i, r in enumerate(rows):
            input_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            attention_mask[i, : len(r)] = 1
        return BatchEncoding({"input_ids": input_ids, "attention_mask": attention_mask})


__all__ = ["RerankerProcessor", "document_text", "prepare_tokenizer"]
