"""Search request bodies: the options every search takes, one query or a batch, fusion and rerank. What a
search answers is in service/search_schemas.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.json_schema import JsonDict

from service.filter_schema import FilterField, FilterJson
from service.schemas import _NOT_BLANK_SCHEMA, REQUEST_CONFIG, CollectionName, UnicodeBody, _not_blank


class RerankOptions(BaseModel):
    model_config = REQUEST_CONFIG
    model: str | None = Field(
        None,
        min_length=1,
        description="reranker, by registry name (GET /models lists them); unset: the server's VELA_RERANKER",
    )
    top_n: int = Field(50, ge=1, le=1000, description="fused hits the cross-encoder rescores (k is returned)")
    max_ms: float | None = Field(
        None,
        gt=0,
        le=600_000,
        description="time budget of the rerank step per query; past it the fused order is returned with "
        "rerank.status 'timeout'. Unset: the server's VELA_RERANK_MAX_MS",
    )
    weight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="the cross-encoder's share of the new order: 1 sorts by its score alone; below 1, a weighted "
        "RRF of its ranking (this weight) and the fused ranking (1 - weight). Unset: the server's VELA_RERANK_WEIGHT",
    )


class FusionOptions(BaseModel):
    model_config = REQUEST_CONFIG
    method: Literal["auto", "rrf", "convex", "dense", "bm25"] = Field(
        "auto",
        description="auto: the collection's stored choice (GET /collections/{name} shows it); rrf; convex: "
        "alpha x norm(dense) + (1 - alpha) x norm(bm25); dense or bm25: that list alone",
    )
    alpha: float | None = Field(
        None, ge=0, le=1, description="dense's share: convex weight (default 0.5); rrf: weights 2a and 2(1 - a)"
    )
    normalization: Literal["minmax", "zscore", "dbsf"] | None = Field(
        None, description="convex: how each list's top-depth scores are normalised (default minmax)"
    )

    @model_validator(mode="after")
    def _auto_takes_nothing(self) -> FusionOptions:
        if self.method == "auto" and (self.alpha is not None or self.normalization is not None):
            raise ValueError(
                "fusion method auto is the collection's stored choice: alpha and normalization go with rrf or convex"
            )
        if self.method in ("dense", "bm25") and (self.alpha is not None or self.normalization is not None):
            raise ValueError(f"fusion method {self.method} is that list alone: it takes no alpha or normalization")
        if self.method == "rrf" and self.normalization is not None:
            raise ValueError("normalization goes with fusion method convex: rrf fuses ranks, not scores")
        return self


DEFAULT_DEPTH = 200
MAX_GROUP_DEPTH = 1000  # documents a group_by draws from, at most (each is ranked and hydrated)


class GroupByOptions(BaseModel):
    model_config = REQUEST_CONFIG
    key: str = Field(
        ...,
        min_length=1,
        max_length=256,
        description="a metadata field (a nested one by its dotted path): hits are grouped by its value. A document "
        "whose field holds a list is in the group of each value; one without the field is a group of its own",
    )
    size: int = Field(1, ge=1, le=100, description="hits kept per value (1: one hit per value, a 'distinct')")
    depth: int | None = Field(
        None,
        ge=1,
        le=MAX_GROUP_DEPTH,
        description="the groups are drawn from the best `depth` documents, at least offset + k (unset: 10 x (offset "
        "+ k), at least 100, at most 1000, never below offset + k); with few distinct values, fewer than k hits come "
        "back",
    )

    def resolve_depth(self, end: int, fused: int | None = None) -> None:
        """The depth as the search uses it: given, at least `end` (offset + k); unset, 10 x `end` within [100,
        1000] (no deeper than `fused`, an explicit hybrid depth whose fused list it is drawn from), never below
        the page."""
        if self.depth is not None:
            if self.depth < end:
                raise ValueError(
                    f"group_by.depth ({self.depth}) is below offset + k ({end}): the groups are drawn from that many "
                    "documents, so the page would be short"
                )
            return
        depth = min(MAX_GROUP_DEPTH, max(100, 10 * end))
        self.depth = max(depth if fused is None else min(depth, fused), end)


MetadataKeys = Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=256)]


class HitParts(UnicodeBody):
    """What each hit carries (Qdrant's with_payload, Elasticsearch's _source): searches and recommendations alike."""

    with_text: bool = Field(True, description="each hit's passage `text`; false: `text` is empty (a smaller answer)")
    with_metadata: bool | MetadataKeys = Field(
        True,
        description="each hit's `metadata`: all of it (true), none (false: `{}`), or only these keys (a nested one "
        "by its dotted path, kept in its place)",
    )


class SearchOptions(HitParts):
    model_config = REQUEST_CONFIG
    collection: str = CollectionName
    k: int = Field(10, ge=1, le=1000, description="hits to return")
    mode: Literal["dense", "bm25", "hybrid"] = "hybrid"
    dim: Literal["full", "256"] = Field(
        "full", description="dense and hybrid: the dense index, full dims, or 256-d then a full rescore"
    )
    rrf_k: int = Field(60, ge=1, le=10_000)
    depth: int = Field(
        DEFAULT_DEPTH,
        ge=1,
        le=10_000,
        description="hybrid: each list is cut to this depth before fusion; at least offset + k (unset, or sent as "
        "200: 200, or offset + k when that is more)",
    )
    weights: dict[Literal["dense", "bm25"], float] | None = Field(None, description="per-list RRF weights")
    group_by_doc: bool = Field(True, description="one hit per document (its best passage)")
    rescore: bool = Field(
        True, description='dim "256": rescore the 256-d shortlist with the full vectors (false only with dim "256")'
    )
    rerank: RerankOptions | None = Field(None, description="rescore the top fused hits with a cross-encoder")
    fusion: FusionOptions | None = Field(None, description="hybrid: how the lists are fused (unset: auto)")
    filter: FilterJson = FilterField
    highlight: bool = Field(
        False, description="each hit's `highlights`: the spans of its text that match a query term, as BM25 matches"
    )
    group_by: GroupByOptions | None = Field(
        None,
        description="at most `size` hits per value of a metadata field (Qdrant's groups, Elasticsearch's collapse)",
    )
    score_threshold: float | None = Field(
        None,
        description="leave out hits whose score is below this: the cosine in dense mode, the BM25 score in bm25 "
        "mode, the fused score in hybrid mode (its scale depends on the fusion); applied before the rerank stage",
    )
    offset: int = Field(
        0,
        ge=0,
        le=10_000,
        description="hits to skip: the page after them is returned. In hybrid mode the fused (and reranked) list "
        "is paginated; pages are stable while the collection's published index is unchanged",
    )

    @field_validator("weights")
    @classmethod
    def _weights_non_negative(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None and any(w < 0 for w in v.values()):
            raise ValueError("weights must be >= 0")
        if v is not None and not any(v.get(name, 1.0) > 0 for name in ("dense", "bm25")):  # a list left out weighs 1
            raise ValueError("at least one weight must be above 0 (with every weight 0, every score is 0)")
        return v

    @model_validator(mode="after")
    def _options_change_the_answer(self) -> SearchOptions:
        """An option that could not change the answer is refused rather than ignored: the caller meant something. A
        value equal to the schema's default is no such option: a generated client that sends every default (as
        OpenAPI shows them) is not refused for it."""
        fusing = [f for f in ("fusion", "weights", "rrf_k", "depth") if self._given(f) and getattr(self, f)]
        if self.mode != "hybrid" and fusing:
            raise ValueError(f"{', '.join(fusing)}: only hybrid mode fuses lists (mode is {self.mode})")
        dense = [f for f in ("dim", "rescore") if self._given(f)]
        if self.mode == "bm25" and dense:
            raise ValueError(f"{', '.join(dense)}: only the dense list uses them (mode is bm25)")
        if self.dim == "full" and not self.rescore:
            raise ValueError('rescore: false goes with dim "256": the full index has no 256-d shortlist to rescore')
        method = self.fusion.method if self.fusion is not None else "auto"
        if self.weights is not None and method not in ("auto", "rrf"):  # weights alone ask for weighted RRF
            raise ValueError(f"weights are RRF's per-list weights: fusion method {method} does not use them")
        if self._given("rrf_k") and method in ("convex", "dense", "bm25"):
            raise ValueError(f"rrf_k is RRF's constant: fusion method {method} does not use it")
        if self.weights is not None and self.fusion is not None and self.fusion.alpha is not None:
            raise ValueError("give rrf either weights or fusion.alpha (which sets both weights), not both")
        end = self.offset + self.k
        if self.group_by is not None:
            self._resolve_group_depth(end)
        if self.mode == "hybrid":
            self._depth_reaches_the_page()
        return self

    def _resolve_group_depth(self, end: int) -> None:
        assert self.group_by is not None
        fused = self.depth if self.mode == "hybrid" and self._given("depth") else None
        self.group_by.resolve_depth(end, fused)

    def _given(self, name: str) -> bool:
        """Sent, with another value than the schema's default. A fusion of method auto and nothing else is the
        default too: left out, the fusion is auto."""
        if name not in self.model_fields_set:
            return False
        value = getattr(self, name)
        if name == "fusion":
            return value is not None and value != FusionOptions()
        return bool(value != type(self).model_fields[name].default)

    def _depth_reaches_the_page(self) -> None:
        """Fusion reads each list to `depth` only, so a page past it would come back short or empty. An explicit
        depth must reach `offset + k` (as Elasticsearch's rank_window_size must reach from + size), and the
        documents a group_by draws from; the default one is deepened to them."""
        end = self.offset + self.k
        drawn = self.group_by.depth if self.group_by is not None and self.group_by.depth is not None else end
        if not self._given("depth"):  # left out or sent as the default: deepened alike
            self.depth = max(DEFAULT_DEPTH, end, drawn)
        elif self.depth < end:
            raise ValueError(
                f"depth ({self.depth}) is below offset + k ({end}): hybrid fuses each list's top depth hits only, "
                "so that page would be short; send depth >= offset + k (the same depth on every page of a query)"
            )
        elif self.depth < drawn:
            raise ValueError(
                f"depth ({self.depth}) is below group_by.depth ({drawn}): hybrid fuses each list's top depth hits "
                "only, so the groups would be drawn from fewer documents; send depth >= group_by.depth"
            )


MAX_QUERY_LENGTH = 10_000
# One query as the schema shows it (the validators below give the messages).
_QUERY_ITEM_SCHEMA: JsonDict = {"maxLength": MAX_QUERY_LENGTH, **_NOT_BLANK_SCHEMA}
QueryText = Annotated[str, Field(json_schema_extra=_QUERY_ITEM_SCHEMA)]


class SearchRequest(SearchOptions):
    query: str = Field(..., max_length=MAX_QUERY_LENGTH, json_schema_extra=_NOT_BLANK_SCHEMA)

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, v: str) -> str:
        return _not_blank(v, "query")


class BatchSearchRequest(SearchOptions):
    queries: list[QueryText] = Field(..., min_length=1)

    @field_validator("queries")
    @classmethod
    def _queries_not_blank(cls, v: list[str]) -> list[str]:
        for i, q in enumerate(v):
            _not_blank(q, f"query {i}")
            if len(q) > MAX_QUERY_LENGTH:
                raise ValueError(f"query {i} is longer than {MAX_QUERY_LENGTH} characters")
        return v


MAX_RECOMMEND_IDS = 64  # documents one recommend request may name, like and unlike together


class RecommendRequest(HitParts):
    model_config = REQUEST_CONFIG
    collection: str = CollectionName
    like: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        ..., min_length=1, max_length=MAX_RECOMMEND_IDS, description="ids of stored documents to find more like"
    )
    unlike: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default_factory=list, max_length=MAX_RECOMMEND_IDS, description="ids of stored documents to steer away from"
    )
    k: int = Field(10, ge=1, le=1000, description="hits to return")
    offset: int = Field(0, ge=0, le=10_000, description="hits to skip: the page after them is returned")
    filter: FilterJson = FilterField
    score_threshold: float | None = Field(None, description="leave out hits whose cosine is below this")
    group_by: GroupByOptions | None = Field(None, description="at most `size` hits per value of a metadata field")

    @model_validator(mode="after")
    def _bounded(self) -> RecommendRequest:
        if self.group_by is not None:
            self.group_by.resolve_depth(self.offset + self.k)
        if len(self.like) + len(self.unlike) > MAX_RECOMMEND_IDS:
            raise ValueError(f"like and unlike name at most {MAX_RECOMMEND_IDS} documents together")
        both = sorted(set(self.like) & set(self.unlike))
        if both:  # it would cancel out of the query vector: surely a mistake
            raise ValueError(f"a document cannot be in both like and unlike: {both[0][:100]!r}")
        return self
