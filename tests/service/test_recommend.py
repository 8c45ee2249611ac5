"""POST /recommend through real HTTP: documents like stored ones, found with their stored vectors; the named
documents are never hits; filters, thresholds, pages and unlike steer it; refusals are 404 or 422."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from tests.service.conftest import running_app, wait_job

DOCS = [
    {
        "id": "tides1",
        "text": "The moon pulls the ocean and makes the tides rise twice a day.",
        "metadata": {"t": "sea"},
    },
    {
        "id": "tides2",
        "text": "Spring tides follow the full and the new moon, when sun and moon align.",
        "metadata": {"t": "sea"},
    },
    {"id": "tides3", "text": "Tide tables list high and low water for each harbour.", "metadata": {"t": "sea"}},
    {
        "id": "bread1",
        "text": "Knead the dough, let it rise, then bake the bread in a hot oven.",
        "metadata": {"t": "food"},
    },
    {"id": "bread2", "text": "Sourdough bread rises slowly with a wild yeast starter.", "metadata": {"t": "food"}},
    {"id": "long", "text": " ".join(["ocean waves and the moon's pull on the sea"] * 60), "metadata": {"t": "sea"}},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_app(tmp_path_factory.mktemp("vela-recommend")) as (client, app):
        r = client.post("/index", json={"collection": "mix", "documents": DOCS})
        assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"
        yield client, app


def _ids(client: httpx.Client, **body: Any) -> list[tuple[str, float]]:
    r = client.post("/recommend", json={"collection": "mix", **body})
    assert r.status_code == 200, r.text
    return [(h["id"], h["score"]) for h in r.json()["hits"]]


def test_like_finds_documents_of_the_same_topic_without_the_named_one(server: Any) -> None:
    client, app = server
    hits = _ids(client, like=["tides1"], k=10)
    assert [h for h, _ in hits][:2] and {h for h, _ in hits[:3]} <= {"tides2", "tides3", "long"}
    assert "tides1" not in {h for h, _ in hits} and len(hits) == len(DOCS) - 1
    # the score is the cosine of the stored vectors: the mean of tides1's passages against the hit's best passage
    coll = app.state.vela.collections.get("mix")
    stored = coll.stored_documents(["tides1", hits[0][0]])
    q = stored["tides1"].embeddings.mean(axis=0)
    q /= np.linalg.norm(q)
    best = max(float(v @ q / np.linalg.norm(v)) for v in stored[hits[0][0]].embeddings)
    assert abs(best - hits[0][1]) < 1e-4


def test_unlike_filter_threshold_and_pages(server: Any) -> None:
    client, _ = server
    steered = [h for h, _ in _ids(client, like=["tides1"], unlike=["bread1"], k=10)]
    assert "bread1" not in steered and steered.index("bread2") == len(steered) - 1
    food = [h for h, _ in _ids(client, like=["tides1"], filter={"must": [{"key": "t", "match": {"value": "food"}}]})]
    assert sorted(food) == ["bread1", "bread2"]
    every = _ids(client, like=["tides1"], k=10)
    cut = every[2][1]
    assert _ids(client, like=["tides1"], k=10, score_threshold=cut) == [h for h in every if h[1] >= cut]
    assert _ids(client, like=["tides1"], k=2, offset=1) == every[1:3]
    assert _ids(client, like=["tides1", "tides1", "tides1"], unlike=["bread1", "bread1"], k=10) == _ids(
        client, like=["tides1"], unlike=["bread1"], k=10
    )  # a document counts once, however often it is named
    both = [h for h, _ in _ids(client, like=["tides1", "tides2"], k=10)]
    assert not {"tides1", "tides2"} & set(both)
    topic = {d["id"]: d["metadata"]["t"] for d in DOCS}
    one_each = _ids(client, like=["tides1"], k=10, group_by={"key": "t"})  # the best of each topic
    assert one_each == [every[0], next(h for h in every if topic[h[0]] == "food")]
    two_each = [h for i, h in enumerate(every) if [topic[x[0]] for x in every[: i + 1]].count(topic[h[0]]) <= 2]
    assert _ids(client, like=["tides1"], k=10, group_by={"key": "t", "size": 2}) == two_each


def test_the_query_vector_is_the_average_of_unit_length_document_means(server: Any) -> None:
    # docs/api.md: each named document's mean passage vector is scaled to unit length (a long document weighs as
    # a short one), then mean(like) + (mean(like) - mean(unlike)), at unit length, is searched.
    client, app = server
    coll = app.state.vela.collections.get("mix")
    stored = coll.stored_documents([d["id"] for d in DOCS])
    assert len(stored["long"].embeddings) > 1  # a document of several passages

    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.linalg.norm(v)  # type: ignore[no-any-return]

    def mean(ids: list[str]) -> np.ndarray:
        return np.mean([unit(stored[d].embeddings.astype(np.float64).mean(axis=0)) for d in ids], axis=0)

    like, unlike = ["long", "tides1"], ["bread1"]
    q = unit(2 * mean(like) - mean(unlike))
    expected = sorted(
        ((max(float(unit(v) @ q) for v in stored[d].embeddings), d) for d in stored if d not in like + unlike),
        reverse=True,
    )
    hits = _ids(client, like=like, unlike=unlike, k=10)
    assert [h for h, _ in hits] == [d for _, d in expected]
    assert [s for _, s in hits] == pytest.approx([s for s, _ in expected], abs=1e-4)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"like": ["nope"]}, 404, "document_not_found"),
        ({"like": ["tides1"], "unlike": ["gone"]}, 404, "document_not_found"),
        ({"like": []}, 422, "invalid_request"),
        ({"like": [""]}, 422, "invalid_request"),
        ({"like": ["tides1"] * 40, "unlike": ["bread1"] * 30}, 422, "invalid_request"),
        ({"like": ["tides1"], "k": 0}, 422, "invalid_request"),
        ({"like": ["tides1"], "filter": {"must": [{"key": "t", "range": {"gte": "x"}}]}}, 422, "invalid_filter"),
        ({"like": ["tides1"], "collection": "none"}, 404, "collection_not_found"),
        ({"like": ["tides1"], "unlike": ["tides1"]}, 422, "invalid_request"),
    ],
)
def test_refusals(server: Any, body: dict[str, Any], status: int, code: str) -> None:
    client, _ = server
    r = client.post("/recommend", json={"collection": "mix", **body})
    assert r.status_code == status and r.json()["error"]["code"] == code, r.text


def test_a_sharded_collection_recommends_as_one_shard_does(server: Any) -> None:
    client, _ = server
    r = client.post("/index", json={"collection": "mix3", "documents": DOCS, "shards": 3})
    assert r.status_code == 202 and wait_job(client, r.json()["job_id"])["status"] == "succeeded"
    one = _ids(client, like=["tides1", "long"], unlike=["bread2"], k=10)
    three = [
        (h["id"], h["score"])
        for h in client.post(
            "/recommend", json={"collection": "mix3", "like": ["tides1", "long"], "unlike": ["bread2"], "k": 10}
        ).json()["hits"]
    ]
    assert [d for d, _ in three] == [d for d, _ in one]
    assert [s for _, s in three] == pytest.approx([s for _, s in one], abs=1e-5)
