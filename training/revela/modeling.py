"""The retriever and the LM trained together (paper Sec. 3): Sim from the retriever, NTP on the in-batch stream.

The LM is loaded with the registered "revela" attention (attention.py); its input is the batch twice, the e
stream then the h stream, and the similarity matrix rides along as a forward keyword. The loss is next-token
prediction on the h stream only, so the retriever's only way to lower it is to put Sim's weight on the chunks
that help predict chunk i: that is its training signal.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from models import EmbedderConfig, resolve_model_dir
from training.contrastive.trainer import BiEncoder, merge_lora
from training.revela.arguments import RevelaArguments
from training.revela.attention import EPS, register


def attach_lora(model: PreTrainedModel, rank: int, alpha: int) -> Any:
    """LoRA on every linear layer (nn.Linear and GPT-2's Conv1D), as the paper does for both models."""
    if rank <= 0:
        return model
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules="all-linear"))


def unwrap(model: nn.Module) -> Any:
    get_base = getattr(model, "get_base_model", None)  # a peft wrapper; LoRA layers live in the base, in place
    return get_base() if callable(get_base) else model


def load_retriever(args: RevelaArguments) -> tuple[BiEncoder, Any, EmbedderConfig]:
    """The encoder (any dir of the shared model package), its tokenizer, and its embedder config with our
    prefix / pooling overrides: what the saved retriever will be served with."""
    root = resolve_model_dir(args.model)
    config = EmbedderConfig.from_dir(root)
    overrides: dict[str, Any] = {"pooling": args.pooling} if args.pooling else {}
    if args.query_prefix is not None:
        overrides["query_prefix"] = args.query_prefix
    if args.document_prefix is not None:
        overrides["document_prefix"] = args.document_prefix
    config = replace(config, **overrides)
    tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
    backbone = attach_lora(AutoModel.from_pretrained(root, local_files_only=True), args.lora_r, args.lora_alpha)
    return BiEncoder(backbone, config), tokenizer, config


def load_lm(args: RevelaArguments, *, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """The causal LM with the in-batch attention (Revela: trained, LoRA or full) or plain and frozen (REPLUG)."""
    revela = args.method == "revela"
    attn = register() if revela else "sdpa"
    lm = AutoModelForCausalLM.from_pretrained(args.lm, local_files_only=True, dtype=dtype, attn_implementation=attn)
    tokenizer = AutoTokenizer.from_pretrained(args.lm, local_files_only=True)
    if not revela:
        return lm.eval().requires_grad_(False), tokenizer
    return attach_lora(lm, args.lm_lora_r, args.lm_lora_alpha), tokenizer


def similarity(queries: torch.Tensor, passages: torch.Tensor, temperature: float) -> torch.Tensor:
    """Sim(D_i, D_j) (Sec. 3.3): softmax over j != i of cosine / tau. (B, d), (B, d) -> (B, B), zero diagonal."""
    q = F.normalize(queries.float(), dim=-1)  # (B, d)
    p = F.normalize(passages.float(), dim=-1)  # (B, d)
    logits = q @ p.T / temperature  # (B, B)
    eye = torch.eye(len(q), dtype=torch.bool, device=q.device)
    return logits.masked_fill(eye, float("-inf")).softmax(dim=-1)  # (B, B)


def sim_metrics(sim: torch.Tensor, doc_ids: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """Diagnostics: the mean top weight, and the weight on chunks of the chunk's own document."""
    out = {"sim_max": sim.detach().max(dim=-1).values.mean()}
    if doc_ids is not None:
        same = doc_ids[:, None] == doc_ids[None, :]  # (B, B)
        same.fill_diagonal_(False)
        rows = same.any(dim=-1)  # (B,) chunks with a sibling in the batch
        if rows.any():
            out["sim_same_doc"] = (sim.detach() * same).sum(-1)[rows].mean()
    return out


@dataclass
class RetrievalLMOutput:
    loss: torch.Tensor
    sim: torch.Tensor  # (B, B) the retriever's distribution over in-batch chunks
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


class RetrieverLM(nn.Module):
    """What Revela and REPLUG share: a retriever scoring the batch's chunks against each other, and an LM."""

    def __init__(self, retriever: BiEncoder, lm: nn.Module, *, temperature: float) -> None:
        super().__init__()
        self.retriever = retriever
        self.lm = lm
        self.temperature = temperature
        self.config = retriever.config  # the Trainer reads model.config

    def embed(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(query embeddings (B, d), passage embeddings (B, d)); one pass when both sides are the same text."""
        q = self.retriever(inputs["query_input_ids"], inputs["query_attention_mask"])  # (B, d)
        if "doc_input_ids" not in inputs:
            return q, q
        return q, self.retriever(inputs["doc_input_ids"], inputs["doc_attention_mask"])  # (B, d)

    def activation_checkpointing_enable(
        self, activation_checkpointing_kwargs: dict | None = None, every_n_layers: int = 1, offload: bool = False
    ) -> None:
        """What the Trainer calls for `--activation_checkpointing`: both models, non-reentrant (LoRA leaves the
        embeddings frozen, and the in-batch keywords must reach every checkpointed layer)."""
        kwargs = activation_checkpointing_kwargs or {"use_reentrant": False}
        for part in (unwrap(self.retriever.backbone), unwrap(self.lm)):
            part.activation_checkpointing_enable(kwargs, every_n_layers=every_n_layers, offload=offload)

    def save_retriever(self, out: Path, tokenizer: Any, config: EmbedderConfig) -> None:
        """A plain encoder directory (LoRA merged) that `load_embedder(out)` reads in one call."""
        merged: Any = merge_lora(self.retriever.backbone)
        merged.save_pretrained(out)
        tokenizer.save_pretrained(out)
        config.save(out)

    def save_lm(self, out: Path, tokenizer: Any) -> None:
        merged: Any = merge_lora(self.lm)
        merged.config._attn_implementation = "sdpa"  # "revela" is registered only inside this trainer
        merged.save_pretrained(out)
        tokenizer.save_pretrained(out)


class RevelaModel(RetrieverLM):
    def __init__(self, retriever: BiEncoder, lm: nn.Module, *, temperature: float, eps: float = EPS) -> None:
        super().__init__(retriever, lm, temperature=temperature)
        self.eps = eps

    def lm_loss(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, sim: torch.Tensor) -> torch.Tensor:
        """NTP loss on the h stream. input_ids, attention_mask (B, L); sim (B, B)."""
        b = input_ids.shape[0]
        base = unwrap(self.lm)
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        both = torch.cat([input_ids, input_ids])  # (2B, L): e stream, then h stream
        hidden = decoder(
            input_ids=both, revela_sim=sim, revela_key_mask=attention_mask.bool(), revela_eps=self.eps, use_cache=False
        ).last_hidden_state  # (2B, L, d)
        logits = head(hidden[b:])  # (B, L, V): only the h stream is scored
        labels = input_ids.masked_fill(attention_mask == 0, -100)  # (B, L)
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)

    def forward(self, **inputs: torch.Tensor) -> RetrievalLMOutput:
        q, p = self.embed(inputs)  # (B, d), (B, d)
        sim = similarity(q, p, self.temperature)  # (B, B)
        loss = self.lm_loss(inputs["lm_input_ids"], inputs["lm_attention_mask"], sim)
        return RetrievalLMOutput(loss, sim, sim_metrics(sim, inputs.get("doc_ids")))
