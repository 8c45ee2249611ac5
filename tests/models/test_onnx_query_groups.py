"""ONNX query passes: a batch runs in groups of similar length, a lone query as before, on one thread."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from models import load_embedder
from models.embedder.onnx_embedder import QUERY_RUN_TOKENS, OnnxEmbedder, length_groups
from models.onnx_export import export

TEXTS = [
    "what causes tides",
    "a much longer text about the gravity of the moon and the sun " * 3,
    "photosynthesis",
    "why is the sky blue at noon",
    "a much longer text about the gravity of the moon " * 2,
]


def _cost(lengths: list[int], groups: list[list[int]], run: int) -> int:
    return sum(run + len(g) * max(lengths[i] for i in g) for g in groups)


def _partitions(order: list[int]) -> list[list[list[int]]]:
    """Every split of `order` into contiguous groups."""
    out = []
    for cuts in itertools.product([False, True], repeat=max(len(order) - 1, 0)):
        groups, start = [], 0
        for i, cut in enumerate(cuts, start=1):
            if cut:
                groups.append(order[start:i])
                start = i
        out.append([*groups, order[start:]])
    return out


def test_length_groups_is_an_optimal_partition() -> None:
    rng = random.Random(5)
    for _ in range(200):
        lengths = [rng.randint(3, 80) for _ in range(rng.randint(1, 8))]
        groups = length_groups(lengths, QUERY_RUN_TOKENS)
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        best = min(_cost(lengths, p, QUERY_RUN_TOKENS) for p in _partitions(order))
        assert _cost(lengths, groups, QUERY_RUN_TOKENS) == best
    assert length_groups([], QUERY_RUN_TOKENS) == []
    assert length_groups([20] * 5, QUERY_RUN_TOKENS) == [[0, 1, 2, 3, 4]]  # equal lengths: one run


@pytest.fixture(scope="module")
def both(tiny_embedder_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> OnnxEmbedder:
    e = load_embedder(export(str(tiny_embedder_dir), str(tmp_path_factory.mktemp("q") / "both"), fp32_documents=True))
    assert isinstance(e, OnnxEmbedder)
    return e


def test_queries_run_on_one_thread_documents_on_the_process_threads(both: OnnxEmbedder) -> None:
    assert both.session.get_session_options().intra_op_num_threads == 1
    assert both.document_session.get_session_options().intra_op_num_threads == torch.get_num_threads()


def test_a_lone_query_is_encoded_as_before(both: OnnxEmbedder) -> None:
    for text in TEXTS:
        assert np.array_equal(both.encode_queries([text]), both._run(both.session, [text]))


def test_a_batch_in_groups_matches_each_text_alone(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    fp32 = load_embedder(export(str(tiny_embedder_dir), str(tmp_path / "fp32"), quantize=False))  # no int8 noise
    assert isinstance(fp32, OnnxEmbedder)
    batch = fp32.encode_queries(TEXTS)  # (n, d)
    alone = np.concatenate([fp32.encode_queries([t]) for t in TEXTS])  # (n, d)
    np.testing.assert_allclose(batch, alone, atol=1e-5)
    np.testing.assert_allclose(batch, fp32._run(fp32.session, TEXTS), atol=1e-5)  # one padded run, as before
