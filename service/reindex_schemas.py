"""Request bodies of the generation routes: POST /collections/{name}/reindex, promote and rollback."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from service.schemas import REQUEST_CONFIG, UnicodeBody
from service.search_requests import MAX_QUERY_LENGTH

# An inline judged set is parsed whole, then every query is searched twice by the job (both generations): bounded
# like the queries of searches, each query and all of them together, and so are the judgements the job scores.
MAX_GATE_QUERIES = 10_000
MAX_GATE_QUERY_CHARS = 2_000_000  # every inline query together (ArguAna's 1,406 long test queries: 1.4 M)
MAX_GATE_JUDGEMENTS = 500_000  # every inline judgement together (TREC-COVID's test split: 66,336)
MAX_GATE_JUDGEMENTS_PER_QUERY = 10_000
MAX_GATE_ID_LENGTH = 1024  # a query's or a judged document's id, as document ids elsewhere

GateId = Annotated[str, Field(min_length=1, max_length=MAX_GATE_ID_LENGTH)]
GateQuery = Annotated[str, Field(max_length=MAX_QUERY_LENGTH)]
Judgements = Annotated[dict[GateId, int], Field(max_length=MAX_GATE_JUDGEMENTS_PER_QUERY)]


class ChunkingIn(BaseModel):
    """A field left out is the serving generation's (service/reindex.py reindex_spec fills it in and checks the
    overlap again against the pair it makes)."""

    model_config = REQUEST_CONFIG
    max_tokens: int | None = Field(
        None, ge=16, le=8192, description="content tokens per passage (default: the serving generation's)"
    )
    overlap: int | None = Field(
        None,
        ge=0,
        le=4096,
        description="tokens shared by consecutive passages, at most half of max_tokens (default: the serving "
        "generation's)",
    )

    @model_validator(mode="after")
    def _overlap(self) -> ChunkingIn:
        if self.overlap is not None and self.max_tokens is not None and self.overlap > self.max_tokens // 2:
            raise ValueError("chunking.overlap must be at most half of chunking.max_tokens")
        return self


class GateIn(BaseModel):
    """A judged query set, and how the new generation must score on it beside the serving one."""

    model_config = REQUEST_CONFIG
    dataset: str | None = Field(
        None, description="a registered dataset (a BEIR-layout folder under <data dir>/datasets), by name"
    )
    split: str = Field("test", max_length=64, description="the dataset's qrels split")
    queries: dict[GateId, GateQuery] | None = Field(
        None,
        max_length=MAX_GATE_QUERIES,
        description=f"inline: {{query id: text}}, each text at most {MAX_QUERY_LENGTH} characters, "
        f"{MAX_GATE_QUERY_CHARS} in all",
    )
    qrels: dict[GateId, Judgements] | None = Field(
        None,
        max_length=MAX_GATE_QUERIES,
        description="inline: {query id: {document id: grade}}, at most "
        f"{MAX_GATE_JUDGEMENTS_PER_QUERY} judgements per query and {MAX_GATE_JUDGEMENTS} in all",
    )
    mode: Literal["dense", "bm25", "hybrid"] = Field("dense", description="how both generations are searched")
    tolerance: float = Field(0.0, ge=0.0, le=1.0, description="promote when new NDCG@10 >= old - tolerance")

    @model_validator(mode="after")
    def _one_source(self) -> GateIn:
        inline = self.queries is not None or self.qrels is not None
        if (self.dataset is not None) == inline:
            raise ValueError("name a dataset, or send queries and qrels inline (one of the two)")
        if inline and (not self.queries or not self.qrels):
            raise ValueError("inline queries and qrels must both be given and not empty")
        chars = sum(len(q) for q in (self.queries or {}).values())
        if chars > MAX_GATE_QUERY_CHARS:
            raise ValueError(
                f"queries: the inline queries have {chars} characters; the limit is {MAX_GATE_QUERY_CHARS}: "
                "register a larger judged set as a dataset (vela datasets add)"
            )
        judgements = sum(len(j) for j in (self.qrels or {}).values())
        if judgements > MAX_GATE_JUDGEMENTS:
            raise ValueError(
                f"qrels: the inline qrels hold {judgements} judgements; the limit is {MAX_GATE_JUDGEMENTS}: "
                "register a larger judged set as a dataset (vela datasets add)"
            )
        return self


class ReindexRequest(UnicodeBody):
    model_config = REQUEST_CONFIG
    # No length or pattern here: every value that is not a registered name gets the one unknown_model error.
    embedder: str = Field(..., description="the new generation's embedder: a registry name (GET /models)")
    chunking: ChunkingIn | None = Field(None, description="new chunking (default: the serving generation's)")
    promote: Literal["auto", "manual"] = Field(
        "auto", description="auto: switch when built (and gated); manual: wait for POST /collections/{name}/promote"
    )
    gate: GateIn | None = Field(None, description="score both generations first; promote only if the new one holds")
    reencode: bool = Field(
        False,
        description="encode every document, even where the new model encodes documents as the current one does and "
        "the stored vectors would be copied",
    )

    def spec(self) -> dict[str, Any]:
        return {
            "chunking": self.chunking.model_dump(exclude_none=True) if self.chunking else None,
            "promote": self.promote,
            "gate": self.gate.model_dump(exclude_none=True) if self.gate else None,
            "reencode": self.reencode,
        }
