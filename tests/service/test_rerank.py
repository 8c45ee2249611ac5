"""The rerank step on its own: ordering, the top_n cut, the time budget and failures (fake cross-encoders)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models.reranker import RerankerCache
from service.rerank import NoReranker, UnknownReranker, prepare_rerank, rerank_hits
from service.search import Hit


class FakeEncoder:
    """Scores a document by the number in its text; optionally slow or broken."""

    name = "/models/fake"

    def __init__(self, *, delay_s: float = 0.0, fail: bool = False, seconds_per_pair: float | None = None) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.seconds_per_pair = seconds_per_pair
        self.calls: list[int] = []

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        self.calls.append(len(documents))
        if self.fail:
            raise RuntimeError("CUDA error: device-side assert triggered\nmore lines")
        time.sleep(self.delay_s)
        return np.array([float(d.split()[-1]) for d in documents], dtype=np.float32)


def _hits(values: list[int]) -> list[Hit]:
    return [
        Hit(
            id=f"d{i}",
            score=1.0 / (i + 1),
            title="",
            text=f"passage {v}",
            metadata={},
            passage_id=i,
            passage_index=0,
            start=0,
            end=1,
        )
        for i, v in enumerate(values)
    ]


def _rerank(encoder: Any, hits: list[Hit], **kw: Any) -> tuple[list[Hit], Any]:
    return rerank_hits(encoder=encoder, query="q", hits=hits, **{"top_n": 50, "max_ms": None, "batch_size": 2, **kw})


def test_top_n_is_sorted_by_score_and_the_rest_keeps_the_fused_order() -> None:
    hits = _hits([1, 5, 3, 9, 2, 8])
    out, outcome = _rerank(FakeEncoder(), hits, top_n=4)
    assert [h.id for h in out] == ["d3", "d1", "d2", "d0", "d4", "d5"]
    assert [h.rerank_score for h in out] == [9.0, 5.0, 3.0, 1.0, None, None]
    assert outcome.status == "ok" and outcome.scored == 4 and outcome.error is None and outcome.took_ms >= 0


def test_ties_keep_the_fused_order() -> None:
    out, _ = _rerank(FakeEncoder(), _hits([4, 4, 4]))
    assert [h.id for h in out] == ["d0", "d1", "d2"]


def test_a_weight_below_one_fuses_the_cross_encoder_ranking_with_the_fused_one() -> None:
    hits = _hits([1, 2, 3, 4, 5, 6])  # fused order d0..d5; the cross-encoder reverses it
    pure, outcome = _rerank(FakeEncoder(), hits, weight=1.0)
    assert [h.id for h in pure] == ["d5", "d4", "d3", "d2", "d1", "d0"] and outcome.weight == 1.0
    kept, _ = _rerank(FakeEncoder(), hits, weight=0.0)
    assert [h.id for h in kept] == ["d0", "d1", "d2", "d3", "d4", "d5"]
    # 0.7 / (1 + r_ce) + 0.3 / (1 + r_fused): the cross-encoder leads, the fused order breaks its near-ties.
    mixed, outcome = _rerank(FakeEncoder(), hits, weight=0.7, rrf_k=1)
    expected = sorted(range(6), key=lambda i: -(0.7 / (1 + 6 - i) + 0.3 / (1 + i + 1)))
    assert [h.id for h in mixed] == [f"d{i}" for i in expected] and outcome.weight == 0.7
    assert [h.rerank_score for h in mixed] == [float(i + 1) for i in expected]  # still the model's own scores


def test_scoring_goes_in_batches() -> None:
    encoder = FakeEncoder()
    _rerank(encoder, _hits(list(range(7))), batch_size=3)
    assert encoder.calls == [3, 3, 1]


def test_a_predicted_overrun_stops_before_scoring() -> None:
    # The model is known to take 10 ms a pair: 2 pairs cannot fit in 5 ms, so nothing runs.
    encoder = FakeEncoder(seconds_per_pair=0.01)
    hits = _hits([1, 2, 3])
    out, outcome = _rerank(encoder, hits, max_ms=5)
    assert out == hits and encoder.calls == []
    assert outcome.status == "timeout" and outcome.scored == 0 and "5 ms" in str(outcome.error)


def test_an_overrun_mid_way_returns_the_fused_order() -> None:
    encoder = FakeEncoder(delay_s=0.03)
    hits = _hits([1, 2, 3, 4, 5, 6])
    out, outcome = _rerank(encoder, hits, max_ms=50)
    assert out == hits and all(h.rerank_score is None for h in out)
    assert outcome.status == "timeout" and 0 < outcome.scored < 6


def test_a_failure_returns_the_fused_order_and_says_why() -> None:
    hits = _hits([1, 2, 3])
    out, outcome = _rerank(FakeEncoder(fail=True), hits)
    assert out == hits
    assert (
        outcome.status == "error"
        and outcome.error == "reranker failed: RuntimeError: CUDA error: device-side assert triggered"
    )


def test_prepare_refuses_bad_names(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    cache = RerankerCache()
    kw: dict[str, Any] = {"cache": cache, "top_n": 5, "max_ms": None, "batch_size": 4}
    with pytest.raises(NoReranker, match="VELA_RERANKER"):
        prepare_rerank(model=None, default_model=None, **kw)
    with pytest.raises(UnknownReranker, match="no config.json"):
        prepare_rerank(model=str(tmp_path / "missing"), default_model=None, **kw)
    with pytest.raises(UnknownReranker, match="not a reranker"):
        prepare_rerank(model=str(tiny_embedder_dir), default_model=None, **kw)


def test_a_reranker_that_will_not_load_is_an_error_outcome(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "vela_reranker", "family": "encoder"}')  # no weights
    step = prepare_rerank(
        cache=RerankerCache(), model=str(broken), default_model=None, top_n=5, max_ms=None, batch_size=4
    )
    hits = _hits([1, 2])
    out, outcome = step("q", hits)
    assert out == hits and outcome.status == "error" and outcome.error.startswith("reranker failed to load: ")
