"""The Embedder interface over an exported ONNX graph, run by ONNX Runtime on the CPU.

A directory made by `vela export-onnx` holds `model.onnx` (input_ids, attention_mask and, where the model
uses them, token_type_ids -> last_hidden_state), the tokenizer, the HF config.json and a
`vela_embedder.json` with `"backend": "onnx"`. The transformer runs in ONNX Runtime; tokenisation, batching and
the pooling rules are the torch Embedder's, with pooling done in numpy: a query then touches no torch op, so
torch's OpenMP pool never wakes next to ONNX Runtime's and FAISS's threads on the serving path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from models.context import CorpusContext
from models.embedder.configuration_embedder import EmbedderConfig
from models.embedder.modeling_embedder import Embedder

log = logging.getLogger("vela.embedder")

MODEL_FILE = "model.onnx"
# Optional: the graph documents go through, when it differs from the queries' (the packaged default's is int8
# per token: see models/packaged_onnx.py; an fp32 one keeps stored vectors equal to torch fp32's).
DOCUMENT_MODEL_FILE = "model.documents.onnx"
# Beside a quantized document graph: the fp32 one, for VELA_DOCUMENT_PRECISION=fp32 (no new export needed).
DOCUMENT_FP32_MODEL_FILE = "model.documents.fp32.onnx"
DOCUMENT_PRECISION_ENV = "VELA_DOCUMENT_PRECISION"
DOCUMENT_PRECISIONS = ("auto", "fp32")  # auto: the directory's model.documents.onnx, whatever it holds
# The precision tag of a graph quantized per token (models/onnx_quantize.py `quantize_per_token`).
TOKEN_INT8 = "int8-token"
OUTPUT_NAME = "last_hidden_state"
# Custom metadata key in model.onnx: "int8" (dynamic quantization) or "fp32"; it becomes `precision`.
PRECISION_KEY = "vela_precision"


def pool_numpy(hidden: np.ndarray, attention_mask: np.ndarray, config: EmbedderConfig) -> np.ndarray:
    """`modeling_embedder.pool` in numpy, float32: (B, L, d) token states and (B, L) mask -> (B, d)."""
    hidden = hidden.astype(np.float32, copy=False)
    mask = attention_mask.astype(np.float32)[..., None]  # (B, L, 1)
    if config.pooling == "mean":
        pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1.0)  # (B, d)
    elif config.pooling == "cls":
        pooled = hidden[:, 0]  # (B, d)
    else:  # last non-padding token; right padding, as in `pool`
        last = attention_mask.sum(1) - 1  # (B,)
        pooled = hidden[np.arange(hidden.shape[0]), last]  # (B, d)
    if config.normalize:
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)  # F.normalize's clamp
    return np.ascontiguousarray(pooled, dtype=np.float32)


# What one session run costs beyond its tokens, in tokens: on the packaged MiniLM (int8, one thread) a run of
# B texts padded to L tokens took about 1.4 ms + 0.075 ms x B x L (per-node dispatch over ~240 nodes, and the
# weights read again), so padding a 20-token query to 40 costs more than a run of its own.
QUERY_RUN_TOKENS = 16


def length_groups(lengths: Sequence[int], run_tokens: int) -> list[list[int]]:
    """Indices of `lengths` in groups (longest first) that minimise sum over groups of run_tokens + size x
    longest: the padded tokens of each group plus its run's fixed cost (an exact partition of the sorted
    lengths, by dynamic programming)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    best = [0] + [0] * len(order)
    cut = [0] * (len(order) + 1)
    for j in range(1, len(order) + 1):
        best[j] = -1
        for i in range(j):  # the last group is order[i:j]; its longest text is order[i]
            cost = best[i] + run_tokens + (j - i) * lengths[order[i]]
            if best[j] < 0 or cost < best[j]:
                best[j], cut[j] = cost, i
    groups = []
    j = len(order)
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]


def document_file(root: Path, document_precision: str | None = None) -> Path | None:
    """The graph documents run in `root`, None when they share the queries' model.onnx.

    `document_precision` (None: VELA_DOCUMENT_PRECISION, else auto): `fp32` picks model.documents.fp32.onnx
    where the export holds one beside a quantized model.documents.onnx."""
    setting = (document_precision or os.environ.get(DOCUMENT_PRECISION_ENV) or "auto").strip().lower()
    if setting not in DOCUMENT_PRECISIONS:
        raise ValueError(f"{DOCUMENT_PRECISION_ENV} must be one of {DOCUMENT_PRECISIONS}, got {setting!r}")
    fp32 = root / DOCUMENT_FP32_MODEL_FILE
    if setting == "fp32" and fp32.is_file():
        return fp32
    doc = root / DOCUMENT_MODEL_FILE
    return doc if doc.is_file() else None


class OnnxEmbedder(Embedder):
    """Same public interface as Embedder; `session` (an onnxruntime InferenceSession) replaces `model`.

    InferenceSession.run is thread-safe, so concurrent encode calls need no lock beyond the tokenizer's.
    Always on the CPU: the device and bf16 precision asked of the torch backend do not apply.
    """

    def __init__(
        self,
        session: ort.InferenceSession,
        tokenizer: PreTrainedTokenizerBase,
        config: EmbedderConfig,
        *,
        dim: int,
        max_positions: int | None,
        name: str,
        document_session: ort.InferenceSession | None = None,
    ) -> None:
        self.session = session
        self.document_session = document_session or session
        self._input_names = [i.name for i in session.get_inputs()]
        meta = session.get_modelmeta().custom_metadata_map
        doc_meta = self.document_session.get_modelmeta().custom_metadata_map
        self.document_precision = doc_meta.get(PRECISION_KEY, "fp32")
        self._setup(
            tokenizer,
            config,
            dim=dim,
            max_positions=max_positions,
            name=name,
            device="cpu",
            precision=meta.get(PRECISION_KEY, "fp32"),
        )

    @classmethod
    def from_dir(
        cls,
        model_dir: str | os.PathLike[str],
        *,
        device: str = "cpu",
        precision: str = "fp32",
        document_precision: str | None = None,
    ) -> OnnxEmbedder:
        root = Path(model_dir)
        config = EmbedderConfig.from_dir(root)
        model_file = root / MODEL_FILE
        if config.backend != "onnx" or not model_file.is_file():
            raise FileNotFoundError(f"{root} is not an ONNX embedder (make one with `vela export-onnx`)")
        if device != "cpu" or precision != "fp32":
            log.warning(
                "ONNX embedders run on the CPU with their exported weights; device and precision are ignored",
                extra={"embedder": str(root), "device": device, "precision": precision},
            )
        hf_config = AutoConfig.from_pretrained(root, local_files_only=True)
        opts = ort.SessionOptions()
        # ONNX Runtime's default is one thread per physical core, as torch's is; following torch keeps any
        # cap the process set (`vela worker` applies VELA_WORKER_THREADS through torch.set_num_threads).
        opts.intra_op_num_threads = torch.get_num_threads()
        # Idle pool threads sleep instead of spinning: spinning kept the CPU from whatever ran next in the
        # process (torch, FAISS's OpenMP); on 2 cores a torch query next to a spinning session took 25 ms
        # instead of 12, while no spinning costs this session about 1 ms per single-query encode.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        doc_file = document_file(root, document_precision) or root / DOCUMENT_MODEL_FILE
        query_opts = opts
        if doc_file.is_file():
            # Queries run on one thread when documents have a session of their own. A query is ~20 tokens: a
            # second thread (woken per op, not spinning) cut no latency on 2 cores and cost ~10 % more CPU per
            # encode, and a server's concurrent requests use the other core anyway.
            query_opts = ort.SessionOptions()
            query_opts.intra_op_num_threads = 1
            query_opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(model_file), sess_options=query_opts, providers=["CPUExecutionProvider"])
        doc_session = None
        if doc_file.is_file():
            doc_session = ort.InferenceSession(str(doc_file), sess_options=opts, providers=["CPUExecutionProvider"])
        tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        return cls(
            session,
            tokenizer,
            config,
            dim=int(hf_config.hidden_size),
            max_positions=getattr(hf_config, "max_position_embeddings", None),
            name=str(root),
            document_session=doc_session,
        )

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, context: CorpusContext | None = None
    ) -> np.ndarray:
        self._refuse_context(context)
        texts = [self.config.document_prefix + t for t in texts]
        return self._encode(texts, batch_size, lambda batch: self._run(self.document_session, batch))

    def _forward(self, texts: list[str], model: Any = None) -> np.ndarray:  # one graph: `model` is unused
        """Queries: a batch is run in groups of similar length (`length_groups`), each padded to its own longest
        text, not all to the longest of the batch. A lone text runs as `_run` runs it."""
        tok = self.tokenizer
        if len(texts) == 1 or tok.pad_token_id is None or tok.padding_side != "right":
            return self._run(self.session, texts)
        with self._tok_lock:
            enc = tok(texts, padding=False, truncation=True, max_length=self.max_tokens)
        lengths = [len(ids) for ids in enc["input_ids"]]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for rows in length_groups(lengths, QUERY_RUN_TOKENS):
            width = max(lengths[i] for i in rows)
            feeds = {}
            for name in self._input_names:  # right padding, as the tokenizer pads: pad id, mask 0, type 0
                arr = np.full((len(rows), width), tok.pad_token_id if name == "input_ids" else 0, dtype=np.int64)
                if name in enc:
                    for r, i in enumerate(rows):
                        arr[r, : lengths[i]] = enc[name][i]
                feeds[name] = arr
            (hidden,) = self.session.run([OUTPUT_NAME], feeds)  # (B, L, d) float32
            out[rows] = pool_numpy(hidden, feeds["attention_mask"], self.config)  # (B, d)
        return out

    def _run(self, session: ort.InferenceSession, texts: list[str]) -> np.ndarray:
        with self._tok_lock:
            batch = self.tokenizer(
                texts, padding=True, truncation=True, max_length=self.max_tokens, return_tensors="np"
            )
        ids = batch["input_ids"].astype(np.int64, copy=False)  # (B, L)
        feeds = {
            n: batch[n].astype(np.int64, copy=False) if n in batch else np.zeros_like(ids) for n in self._input_names
        }
        (hidden,) = session.run([OUTPUT_NAME], feeds)  # (B, L, d) float32
        return pool_numpy(hidden, feeds["attention_mask"], self.config)  # (B, d)

    def _last_hidden_state(self, batch: Mapping[str, torch.Tensor], model: Any = None) -> torch.Tensor:
        ids = batch["input_ids"].numpy()  # (B, L) int64
        feeds = {n: batch[n].numpy() if n in batch else np.zeros_like(ids) for n in self._input_names}
        (hidden,) = self.session.run([OUTPUT_NAME], feeds)  # (B, L, d)
        return torch.from_numpy(hidden)
