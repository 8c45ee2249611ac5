"""Title pseudo-queries: a document's title as the query, its first passage without the title as the positive.

The other half of `vela adapt`'s label-free queries, beside the sentences the fusion chooser cuts out of
passages (indexing/fusion_choice.py, the Inverse Cloze Task). A title is a short statement of what the document
is about, written by its author for readers who search: on SciFact it is close to the claims people query with.
Like the cut sentence, the title is taken out of the positive (the indexed passage reads title then body), so
the pair teaches what the body says, not a copy of words the query already holds.
"""

from __future__ import annotations

from typing import Any

from indexing.fusion_choice import WORD_RE, ChoiceParams, PseudoQuery, _prose_share


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
