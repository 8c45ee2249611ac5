"""Index, search, collections and document deletes through both clients against a real server: the answers come
back typed, and each route's failures come back as the right exception with the API's code and status."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from vela_client import (
    BatchSearchResponse,
    Collection,
    Conflict,
    Document,
    DocumentLike,
    Fusion,
    Hit,
    InvalidRequest,
    Job,
    JobAccepted,
    NotFound,
    Rerank,
    SearchResponse,
    VelaClient,
)

from tests.client.conftest import API_KEY

DOCS: list[DocumentLike] = [
    Document(id="berlin", title="Berlin", text="Berlin is the capital of Germany and has 3.7 million inhabitants."),
    Document(id="paris", title="Paris", text="Paris is the capital and largest city of France."),
    {"id": "cat", "title": "Cats", "text": "The domestic cat is a small carnivorous mammal kept as a pet."},
    {"id": "photo", "text": "Photosynthesis converts light energy into chemical energy.", "metadata": {"y": 1}},
]


@pytest.fixture(scope="module")
def cities(vela_url: str) -> str:
    with VelaClient(vela_url, api_key=API_KEY) as vela:
        job = vela.index("cities", DOCS, wait=True)
    assert job.status == "succeeded" and job.total == 4
    return "cities"


def test_index_and_wait_reports_progress_then_the_documents_are_searchable(
    client: VelaClient, unique: Callable[[str], str]
) -> None:
    name = unique("waited")
    seen: list[Job] = []
    job = client.index(name, DOCS, wait=True, on_progress=seen.append, timeout=120)
    assert isinstance(job, Job) and job.succeeded and job.done == job.total == 4 and job.collection == name
    assert seen and seen[-1] == job  # the last report is the final state
    assert [j.status for j in seen][-1] == "succeeded"
    info = client.get_collection(name)
    assert isinstance(info, Collection) and info.documents == 4 and info.passages >= 4
    hits = client.search(name, "capital of France", mode="bm25").hits
    assert hits[0].id == "paris" and hits[0].title == "Paris"


def test_index_without_wait_returns_the_accepted_job(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("accepted")
    accepted = client.index(name, [{"id": "a", "text": "apples are red"}])
    assert isinstance(accepted, JobAccepted) and accepted.url.endswith(f"/jobs/{accepted.job_id}")
    assert client.wait_job(accepted).succeeded
    assert client.get_job(accepted.job_id).status == "succeeded"


def test_index_new_collection_with_shards_then_a_different_count_is_a_conflict(
    client: VelaClient, unique: Callable[[str], str]
) -> None:
    name = unique("sharded")
    client.index(name, [{"id": "a", "text": "alpha"}, {"id": "b", "text": "beta"}], shards=2, wait=True)
    assert client.get_collection(name).shards == 2
    with pytest.raises(Conflict) as err:
        client.index(name, [{"id": "c", "text": "gamma"}], shards=3)
    assert err.value.status == 409 and err.value.code == "conflict" and "shard" in err.value.message


def test_index_bad_input_is_invalid_request_with_details(client: VelaClient, unique: Callable[[str], str]) -> None:
    with pytest.raises(InvalidRequest) as err:
        client.index(unique("bad"), [{"id": "a", "text": "   "}])
    assert err.value.status == 422 and err.value.code == "invalid_request"
    assert err.value.details and "must not be empty" in err.value.message
    with pytest.raises(InvalidRequest) as unknown:
        client.index(unique("bad"), [{"id": "a", "text": "x"}], embedder="/no/such/model")
    assert unknown.value.code == "unknown_model"


def test_on_progress_without_wait_is_refused(client: VelaClient) -> None:
    with pytest.raises(ValueError, match="only with wait=True"):
        client.index("any", [{"id": "a", "text": "x"}], on_progress=print)  # type: ignore[call-overload]


def test_search_returns_typed_hits(client: VelaClient, cities: str) -> None:
    result = client.search(cities, "capital of France", mode="bm25", k=2)
    assert isinstance(result, SearchResponse) and len(result.hits) == 2 and result.took_ms >= 0
    top = result.hits[0]
    assert isinstance(top, Hit) and top.id == "paris" and top.ranks.bm25 == 1
    assert top.passage.index == 0 and top.passage.end - top.passage.start == len(top.text)
    photo = client.search(cities, "photosynthesis light energy", mode="bm25", k=1).hits[0]
    assert photo.id == "photo" and photo.metadata == {"y": 1}


def test_every_search_option_reaches_the_server(client: VelaClient, cities: str) -> None:
    result = client.search(
        cities,
        "capital",
        k=1,
        mode="hybrid",
        dim=256,  # an int is sent as the API's "256"
        rrf_k=10,
        depth=3,
        weights={"dense": 0.0, "bm25": 1.0},
        group_by_doc=False,
        rescore=False,
    )
    assert len(result.hits) == 1 and result.hits[0].id in ("berlin", "paris")
    # The server has no reranker: the option arrived, and was refused for that reason.
    with pytest.raises(InvalidRequest) as err:
        client.search(cities, "capital", rerank=Rerank(top_n=5))
    assert err.value.code == "no_reranker"
    with pytest.raises(InvalidRequest) as err:
        client.search(cities, "capital", rerank={"top_n": 0})
    assert err.value.code == "invalid_request" and "top_n" in err.value.message
    # fusion: a model or a dict; one list alone ranks as that list does
    for fusion in (Fusion(method="bm25"), {"method": "bm25"}):
        fused = client.search(cities, "capital of France", k=1, fusion=fusion)
        assert fused.hits[0].id == "paris" and fused.hits[0].ranks.bm25 == 1
    with pytest.raises(InvalidRequest) as err:
        client.search(cities, "capital", fusion={"method": "auto", "alpha": 0.5})
    assert "alpha" in err.value.message
    everyone = client.search(cities, "capital", k=10)
    one = client.search(cities, "capital", k=10, group_by={"key": "absent-field", "size": 1})
    assert [h.id for h in one.hits] == [h.id for h in everyone.hits]  # without the field: each a group of its own
    with pytest.raises(InvalidRequest) as err:
        client.search(cities, "capital", group_by={"key": "x", "size": 0})
    assert "size" in err.value.message


def test_reindex_copies_or_encodes_the_document_vectors(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("reindexed")
    assert client.index(name, DOCS, wait=True).status == "succeeded"
    # The test server's own embedder is a folder outside the registry: no request can name it.
    assert client.get_collection(name).embedder == "unregistered"
    moved = client.reindex(name, "default", wait=True)  # the packaged MiniLM: another model, every document encoded
    assert isinstance(moved, Job) and moved.status == "succeeded", moved.error
    assert moved.result is not None and moved.result["documents"] == {"embedded": len(DOCS), "copied": 0, "resumed": 0}
    copied = client.reindex(name, "default", wait=True)  # the same model: the stored vectors are copied
    assert copied.result is not None and copied.result["documents"] == {
        "embedded": 0,
        "copied": len(DOCS),
        "resumed": 0,
    }
    encoded = client.reindex(name, "default", reencode=True, wait=True)
    assert encoded.result is not None and encoded.result["documents"] == {
        "embedded": len(DOCS),
        "copied": 0,
        "resumed": 0,
    }
    coll = client.get_collection(name)
    assert coll.embedder == "default" and coll.dims["full"] == 384
    assert coll.generations is not None and coll.generations["current"]["generation"] == 3
    assert "method" in coll.fusion and coll.schema_ == {"fields": {}, "strict": False}
    assert client.search(name, "capital of France", k=1, mode="bm25").hits[0].id == "paris"


def test_search_errors(client: VelaClient, cities: str) -> None:
    with pytest.raises(NotFound) as missing:
        client.search("no-such-collection", "anything")
    assert missing.value.status == 404 and missing.value.code == "collection_not_found"
    assert missing.value.request_id  # to quote when reporting a problem
    with pytest.raises(InvalidRequest) as bad:
        client.search(cities, "anything", k=0)
    assert bad.value.status == 422 and bad.value.details
    with pytest.raises(TypeError, match="unknown search options: top_k"):
        client.search(cities, "anything", top_k=3)  # type: ignore[call-arg]


def test_search_batch_answers_each_query_in_order(client: VelaClient, cities: str) -> None:
    result = client.search_batch(cities, ["France", "cats as pets"], k=1, mode="bm25")
    assert isinstance(result, BatchSearchResponse)
    assert [r.hits[0].id for r in result.results] == ["paris", "cat"]


def test_search_batch_errors(client: VelaClient, cities: str) -> None:
    with pytest.raises(NotFound):
        client.search_batch("no-such-collection", ["a"])
    with pytest.raises(InvalidRequest) as err:
        client.search_batch(cities, [])
    assert err.value.status == 422
    with pytest.raises(TypeError, match="not one string"):
        client.search_batch(cities, "one query")


def test_list_collections(client: VelaClient, cities: str) -> None:
    listed = client.list_collections()
    assert all(isinstance(c, Collection) for c in listed)
    assert cities in [c.name for c in listed]


def test_get_collection_unknown_is_not_found(client: VelaClient) -> None:
    with pytest.raises(NotFound) as err:
        client.get_collection("no-such-collection")
    assert (err.value.status, err.value.code) == (404, "collection_not_found")
    assert "no-such-collection" in str(err.value)


def test_delete_document_any_id_then_delete_collection(client: VelaClient, unique: Callable[[str], str]) -> None:
    name = unique("deletes")
    odd = "dir/file name?x=1#frag%20"  # "/", "?", "#" and "%" all survive the path
    client.index(name, [{"id": odd, "text": "zebras stripes"}, {"id": "keep", "text": "lions manes"}], wait=True)
    assert client.search(name, "zebras", mode="bm25").hits[0].id == odd
    accepted = client.delete_document(name, odd)
    assert isinstance(accepted, JobAccepted)
    assert client.wait_job(accepted).succeeded
    assert client.get_collection(name).documents == 1
    assert client.search(name, "zebras", mode="bm25").hits == []
    assert client.delete_document(name, "keep", wait=True).succeeded
    client.delete_collection(name)
    with pytest.raises(NotFound):
        client.get_collection(name)


def test_delete_errors(client: VelaClient) -> None:
    with pytest.raises(NotFound) as doc:
        client.delete_document("no-such-collection", "a")
    assert doc.value.code == "collection_not_found"
    with pytest.raises(NotFound) as coll:
        client.delete_collection("no-such-collection")
    assert coll.value.code == "collection_not_found"
    with pytest.raises(ValueError, match="doc_id must be a non-empty string"):
        client.delete_document("any", "")
