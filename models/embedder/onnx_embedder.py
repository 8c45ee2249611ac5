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

import numpy as np
import onnxruntime as ort
import torch
from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from models.context import CorpusContext
from models.embedder.configuration_embedder import EmbedderConfig
from models.embedder.modeling_embedder import Embedder

log = logging.getLogger("vela.embedder")

MODEL_FILE = "model.onnx"
# Optional: the graph documents go through, when it differs from the queries' (the packaged default keeps its
# documents in fp32: stored vectors then equal torch fp32's, and only the query side carries int8 error).
DOCUMENT_MODEL_FILE = "model.documents.onnx"
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
        cls, model_dir: str | os.PathLike[str], *, device: str = "cpu", precision: str = "fp32"
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
        session = ort.InferenceSession(str(model_file), sess_options=opts, providers=["CPUExecutionProvider"])
        doc_file = root / DOCUMENT_MODEL_FILE
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

    def _forward(self, texts: list[str]) -> np.ndarray:
        return self._run(self.session, texts)

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

    def _last_hidden_state(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        ids = batch["input_ids"].numpy()  # (B, L) int64
        feeds = {n: batch[n].numpy() if n in batch else np.zeros_like(ids) for n in self._input_names}
        (hidden,) = self.session.run([OUTPUT_NAME], feeds)  # (B, L, d)
        return torch.from_numpy(hidden)
