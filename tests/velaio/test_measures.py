"""The shared measures: a run built from Vela's order is scored in that order, whatever its ids sort like."""

from __future__ import annotations

import pytest

from velaio.measures import MEASURES, per_query_ndcg, ranked_scores, score_run


def test_ranked_scores_keep_the_order_given_even_against_the_ids_order() -> None:
    scores = ranked_scores(["z", "a", "m"])
    assert sorted(scores, key=lambda d: -scores[d]) == ["z", "a", "m"]
    assert len(set(scores.values())) == 3


def test_a_perfect_run_scores_one_and_a_missing_query_scores_zero() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 2}}
    run = {"q1": ranked_scores(["d1", "d9"])}  # q2 not searched
    assert per_query_ndcg(qrels, run) == {"q1": 1.0, "q2": 0.0}
    figures = score_run(qrels, run)
    assert set(figures) == set(MEASURES)
    assert figures["ndcg@10"] == pytest.approx(0.5) and figures["mrr@10"] == pytest.approx(0.5)


def test_order_decides_not_the_id_a_tie_would_fall_back_on() -> None:
    qrels = {"q": {"b": 1}}
    first, second = (
        per_query_ndcg(qrels, {"q": ranked_scores(["b", "a"])}),
        per_query_ndcg(qrels, {"q": ranked_scores(["a", "b"])}),
    )
    assert first["q"] == 1.0 and second["q"] < 1.0
