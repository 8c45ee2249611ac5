"""Label-free pseudo-queries cut out of a collection's own documents, for the fusion chooser
(indexing/fusion_choice.py) and `vela adapt`.

- **Sentences** (the Inverse Cloze Task, Lee et al. 2019): a sentence of a sampled passage is the query, the
  passage *without that sentence* the one relevant document. Removing the sentence keeps the estimate fair:
  scored against the whole passage, a query copied out of it matches every one of its words and BM25 wins by
  construction.
- **Titles**: a document's title is the query, its first passage without the title the positive. A title is a
  short statement of what the document is about, written by its author for readers who search: on SciFact it is
  close to the claims people query with. Like the cut sentence, the title is taken out of the positive (the
  indexed passage reads title then body), so the pair teaches what the body says, not a copy of words the query
  already holds.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from velaio.text import passage_text

SENTENCE_END = re.compile(r"[.!?;](?=\s)|\n")
WORD_RE = re.compile(r"\w+")
PLAIN_WORD = re.compile(r"(?=[^\W\d_]*[^\W\d_])[^\W_]+(?:[-'][^\W_]+)*")  # a letter; inner - or ' only
PUNCTUATION = ".,;:!?\"'()[]"
CODE = re.compile(r"[=<>{}\[\]]|\w\(|[^\W\d_]\.[^\W\d_]|\w_\w")  # operators, calls, attributes, snake_case


@dataclass(frozen=True)
class ChoiceParams:
    samples: int = 200  # pseudo-queries (documents sampled, one sentence each)
    seed: int = 0
    depth: int = 200  # the lists fused, as deep as a search's default depth
    rrf_k: int = 60
    min_words: int = 4  # a sentence shorter than this is no query
    max_words: int = 32  # longer sentences are cut to their first words: queries are short
    prose: float = 0.75  # share of a sentence's tokens that must be plain words: people query in words
    cut: bool = True  # the source is its passage without the query (False: the whole passage, for comparison)


@dataclass(frozen=True)
class PseudoQuery:
    doc_id: str
    pids: frozenset[int]  # every passage of the source document: taken out of the lists
    query: str
    rest: str  # what the index would read of the cut passage: title, then the passage without the query


def sample_pseudo_queries(coll: Any, params: ChoiceParams) -> list[PseudoQuery]:
    """Up to params.samples pseudo-queries: documents drawn with a fixed seed, in each a random passage and in
    it a random sentence of min_words words or more that the title does not already hold."""
    ids = sorted(i for shard in coll.shard_list for i in shard.docstore.document_ids())
    rng = random.Random(params.seed)
    out: list[PseudoQuery] = []
    for doc_id in rng.sample(ids, len(ids)):  # a fixed order of every document: the first that give a query
        if len(out) == params.samples:
            break
        doc = coll.document(doc_id, passages=True)
        if doc is None or not doc.passages:
            continue
        _, _, start, end = doc.passages[rng.randrange(len(doc.passages))]
        cut = _cut_sentence(doc.title, doc.text[start:end], rng, params)
        if cut is not None:
            query, rest = cut
            out.append(PseudoQuery(doc_id, frozenset(p[0] for p in doc.passages), query, passage_text(doc.title, rest)))
    return out


def _cut_sentence(title: str, body: str, rng: random.Random, params: ChoiceParams) -> tuple[str, str] | None:
    """(query, the body without it), or None when no sentence fits or too little would be left."""
    parts = _sentences(body)
    title_words = set(WORD_RE.findall(title.lower()))
    usable = []
    for a, b in parts if len(parts) > 1 else ():
        words = WORD_RE.findall(body[a:b].lower())
        if len(words) < params.min_words or _prose_share(body[a:b]) < params.prose:
            continue
        if title_words and sum(w in title_words for w in words) >= 0.5 * len(words):
            continue  # the title repeated in the text: the indexed title would still hold the query
        if len(WORD_RE.findall(body)) - len(words) < params.min_words:
            continue
        usable.append((a, b))
    if not usable:
        return None
    a, b = usable[rng.randrange(len(usable))]
    words = body[a:b].split()
    rest = (body[:a] + " " + body[b:]).strip() if params.cut else body
    return " ".join(words[: params.max_words]), rest


def _prose_share(text: str) -> float:
    """The share of whitespace-separated tokens that are words once stripped of punctuation around them, and
    0 for a line with code in it (`x = f(y)`, `a.b`, `d[k]`, `snake_case`): a docstring's sentence is a query
    a person could type, a line of code is not."""
    tokens = text.split()
    if CODE.search(text) or not tokens:
        return 0.0
    return sum(PLAIN_WORD.fullmatch(t.strip(PUNCTUATION)) is not None for t in tokens) / len(tokens)


def _sentences(text: str) -> list[tuple[int, int]]:
    """Spans of the non-blank pieces between sentence ends (., !, ? or ; before a space) and line breaks."""
    spans, start = [], 0
    for m in SENTENCE_END.finditer(text):
        if text[start : m.end()].strip():
            spans.append((start, m.end()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def title_pseudo_queries(coll: Any, params: ChoiceParams = ChoiceParams()) -> list[PseudoQuery]:
    """One pseudo-query per document whose title has at least `min_words` words of prose (cut to `max_words`),
    in document-id order; the positive is the document's first passage without its title."""
    ids = sorted(i for shard in coll.shard_list for i in shard.docstore.document_ids())
    out: list[PseudoQuery] = []
    for doc_id in ids:
        doc = coll.document(doc_id, passages=True)
        if doc is None or not doc.passages or not doc.title:
            continue
        words = doc.title.split()
        if len(WORD_RE.findall(doc.title)) < params.min_words or _prose_share(doc.title) < params.prose:
            continue
        _, _, start, end = doc.passages[0]
        body = doc.text[start:end].strip()
        if len(WORD_RE.findall(body)) < params.min_words:
            continue
        pids = frozenset(p[0] for p in doc.passages)
        out.append(PseudoQuery(doc_id, pids, " ".join(words[: params.max_words]), body))
    return out
