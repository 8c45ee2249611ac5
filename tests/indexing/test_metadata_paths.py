"""Nested metadata through dotted paths (indexing/metadata_paths.py): what the flat view holds, and that a filter on
`o.v` answers, through declared columns, undeclared columns and the scan alike, as it would on a document holding
at `o.v` what an independent walk of the objects finds there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from indexing.filter_match import each_matches, matches
from indexing.filter_parser import parse_filter
from indexing.filters import FilterError, Schema
from indexing.metadata_fit import first_misfit
from indexing.metadata_paths import flatten, path_key, project
from indexing.payload import Payload


def test_the_flat_view_names_nested_values_by_their_paths() -> None:
    flat = flatten({"a": {"b": 1, "c": {"d": "x"}}, "t": ["p", "q"]})
    assert flat["a.b"] == 1 and flat["a.c.d"] == "x" and flat["a.c"] == {"d": "x"} and flat["t"] == ["p", "q"]
    lists = flatten({"a": [{"b": 1}, {"b": [2, 3]}, {"c": 0}, "loose", None]})
    assert lists["a.b"] == [1, 2, 3] and lists["a.c"] == 0
    assert flatten({"a.b": 4, "a": {"b": 5}})["a.b"] == [4, 5]  # a dotted key is the same path
    assert flatten({"a": {"b": None}})["a.b"] is None and "a.b" not in flatten({"a": None})
    plain = {"x": 1, "y": [1, "a"]}
    assert flatten(plain) is plain  # nothing nested: no copy
    assert path_key("a[].b") == "a.b" and path_key("tags[]") == "tags" and path_key("a.b") == "a.b"


def test_a_projection_keeps_nested_keys_in_their_place() -> None:
    md = {"a": {"b": 1, "c": {"d": 2, "e": 3}}, "refs": [{"y": 1, "z": 0}, {"z": 2}, "x"], "a.b": 9, "t": 4}
    assert project(md, ("a.c.d", "t")) == {"a": {"c": {"d": 2}}, "t": 4}
    assert project(md, ("a.c.d", "a.b")) == {"a.b": 9, "a": {"b": 1, "c": {"d": 2}}}  # the dotted key as it is too
    assert project(md, ("a.c", "a.c.e")) == {"a": {"c": {"d": 2, "e": 3}}}  # the shorter path keeps the whole
    assert project(md, ("refs[].y",)) == {"refs": [{"y": 1}]}  # objects without it are left out
    assert project(md, ("t.x", "absent.b", "a.zz")) == {}  # a path through a value, or to nothing, keeps nothing
    assert project({"a.b": {"c": 9, "d": 1}}, ("a.b.c",)) == {"a.b": {"c": 9}}  # through a dotted key, as filters
    assert project({"a": {"": {"b": 8}}}, ("a..b",)) == {"a": {"": {"b": 8}}}  # an empty key is a key


def test_paths_longer_than_a_filter_key_are_not_kept() -> None:
    # Long keys nested deep: each path repeats its prefix, so keeping all would cost the square of their length.
    node: dict[str, Any] = {f"{i:x}": "s" for i in range(900)}
    for d in range(30):
        node = {chr(97 + d % 26) * 1800: node}
    flat = flatten(node)
    assert list(flat) == list(node)  # the top-level key alone: every path below it is longer than MAX_PATH
    deep = flatten({"a" * 200: {"b" * 50: {"c": 1, "d" * 10: 2}}})
    assert set(deep) == {"a" * 200, "a" * 200 + "." + "b" * 50, "a" * 200 + "." + "b" * 50 + ".c"}


ROWS: list[dict[str, Any]] = [
    {"author": {"name": "Ada", "born": 1815}, "refs": [{"year": 2001}, {"year": 2019}]},
    {"author": {"name": "Alan", "born": 1912}, "refs": [{"year": 1950}]},
    {"author": {"name": None}, "refs": []},
    {"author": "Grace"},  # a string where others hold an object: no author.name
    {"author.name": "Ada"},  # a dotted key: the same path
]


@pytest.mark.parametrize("declared", [False, True])
def test_filters_reach_nested_fields_declared_or_not(declared: bool) -> None:
    fields = {"author.name": "keyword", "author.born": "integer", "refs.year": "integer"} if declared else {}
    p = Payload(ROWS)
    p.index(fields)
    schema = Schema(fields)
    for raw, want in [
        ({"key": "author.name", "match": {"value": "Ada"}}, [0, 4]),
        ({"key": "author.born", "range": {"gte": 1900}}, [1]),
        ({"key": "refs[].year", "range": {"gt": 2010}}, [0]),  # Qdrant's spelling
        ({"key": "refs.year", "range": {"lt": 2000}}, [1]),
        ({"key": "refs.year", "values_count": {"gte": 2}}, [0]),
        ({"is_null": {"key": "author.name"}}, [2]),
        ({"exists": {"key": "author.name"}}, [0, 1, 4]),
        ({"is_empty": {"key": "refs.year"}}, [2, 3, 4]),
        ({"key": "author.name", "match": {"except": ["Ada"]}}, [1]),
    ]:
        node = parse_filter(raw, schema)
        assert node is not None
        assert np.flatnonzero(p.mask(node, fields)).tolist() == want, raw
        assert [i for i, md in enumerate(ROWS) if matches(node, md)] == want, raw
        assert [i for i, ok in enumerate(each_matches(node, ROWS)) if ok] == want, raw


def test_a_declared_nested_field_checks_its_values_type() -> None:
    fields = {"author.born": "integer"}
    assert first_misfit(fields, [{"metadata": {"author": {"born": 1815}}}]) is None
    bad = first_misfit(fields, [{"metadata": {}}, {"metadata": {"author": [{"born": 1}, {"born": "x"}]}}])
    assert bad is not None and bad.startswith("documents[1].metadata.author.born: the field is declared integer")


def test_a_key_of_array_marks_alone_is_refused() -> None:
    with pytest.raises(FilterError, match="not only"):
        parse_filter({"key": "[]", "match": {"value": 1}})


scalars = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", ""]), st.booleans(), st.just(2.5))
values = st.one_of(st.none(), scalars, st.lists(st.one_of(st.none(), scalars), max_size=3))
objects = st.dictionaries(st.sampled_from(["v", "w"]), values, max_size=2)
holder = st.one_of(objects, st.lists(st.one_of(objects, scalars, st.none()), max_size=3), scalars, st.none())
metadata = st.fixed_dictionaries({}, optional={"o": holder, "o.v": values, "v": values})
condition = st.one_of(
    st.builds(lambda v: {"key": "o.v", "match": {"value": v}}, scalars),
    st.builds(lambda vs: {"key": "o.v", "match": {"except": vs}}, st.lists(scalars, min_size=1, max_size=3)),
    st.builds(lambda b: {"key": "o[].v", "range": {"gte": b}}, st.integers(-3, 3)),
    st.builds(lambda c: {"key": "o.v", "values_count": {"gte": c}}, st.integers(0, 3)),
    st.just({"exists": {"key": "o.v"}}),
    st.just({"is_null": {"key": "o.v"}}),
)


def _at_o_v(md: dict[str, Any]) -> dict[str, Any]:
    """The document as it would be with what lies at `o.v` stored under that key, found by walking `o` directly."""
    found = [md["o.v"]] if "o.v" in md else []
    o = md.get("o")
    for obj in [o] if isinstance(o, dict) else [x for x in o if isinstance(x, dict)] if isinstance(o, list) else []:
        if "v" in obj:
            found.append(obj["v"])
    if not found:
        return {}
    if len(found) == 1:
        return {"o.v": found[0]}
    return {"o.v": [x for f in found for x in (f if isinstance(f, list) else [f])]}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(metadata, min_size=1, max_size=6), raw=condition, declared=st.booleans())
def test_a_nested_path_answers_as_that_value_stored_at_the_path(
    rows: list[dict[str, Any]], raw: dict[str, Any], declared: bool
) -> None:
    kind = "integer" if "range" in raw else "keyword"
    fields = {"o.v": kind} if declared else {}
    try:
        node = parse_filter(raw, Schema(fields))
    except FilterError:  # a value not of the declared type: refused, nothing to compare
        assume(False)
    assert node is not None
    want = [matches(node, _at_o_v(md)) for md in rows]
    p = Payload(rows)
    p.index(fields)
    got = p.mask(node, fields).tolist()
    if not declared:
        assert got == want, (raw, rows)
    else:  # a declared column holds its type's values only (values of another type are refused at write time)
        fitting = [i for i, md in enumerate(rows) if first_misfit(fields, [{"metadata": md}]) is None]
        assert [got[i] for i in fitting] == [want[i] for i in fitting], (raw, rows)
    assert [matches(node, md) for md in rows] == want


def test_declaring_or_patching_checks_nested_values_by_their_paths(tmp_path: Path, tiny_embedder_dir: Path) -> None:
    from indexing.collection import CollectionSettings
    from indexing.ingest import run_job
    from indexing.jobs import JobKind, JobStore
    from indexing.metadata_bounds import MetadataLimits
    from indexing.metadata_fit import SchemaMismatch
    from indexing.patch_job import run_patch
    from indexing.store import CollectionStore
    from models import EmbedderCache

    store, jobs = CollectionStore(tmp_path), JobStore(tmp_path / "jobs.sqlite3")
    dim = EmbedderCache().get(tiny_embedder_dir).dim
    coll = store.create(CollectionSettings(name="c", embedder=str(tiny_embedder_dir), dim=dim))
    docs = [
        {"id": "bad", "text": "one", "metadata": {"author": [{"born": 5}, {"born": "long ago"}]}},
        {"id": "good", "text": "two", "metadata": {"author": {"born": 7}}},
    ]

    def run(kind: JobKind, payload: list[Any]) -> str:
        job = jobs.create(collection="c", kind=kind, payload=payload)
        status = str(run_job(job_id=job.id, jobs=jobs, collections=store, embedders=EmbedderCache()))
        assert status == "succeeded" or "do not fit the declared fields" in (jobs.get(job.id).error or "")
        return status

    assert run(JobKind.UPSERT, docs) == "succeeded"
    schema = {"fields": {"author.born": "integer"}}
    assert run(JobKind.SCHEMA, [schema]) == "failed"  # "long ago" does not fit: nothing declared
    assert coll.settings.schema.get("fields", {}) == {}
    assert run(JobKind.UPSERT, [{"id": "bad", "text": "one", "metadata": {"author": {"born": 1}}}]) == "succeeded"
    assert run(JobKind.SCHEMA, [schema]) == "succeeded"
    patch = [{"id": "good", "metadata": {"author": {"born": "x"}}, "mode": "merge"}]
    with pytest.raises(SchemaMismatch, match=r"metadata\.author\.born"):  # declared since the patch was asked
        run_patch(store.get("c"), patch, MetadataLimits())


def test_a_schema_field_with_array_marks_is_refused() -> None:
    from indexing.collection import check_schema

    with pytest.raises(ValueError, match=r"dotted path \('refs\.year'\)"):
        check_schema({"fields": {"refs[].year": "integer"}})
