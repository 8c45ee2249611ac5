"""A request's access in its handler: the collection checks and the pinned filters of scoped tokens
(service/access_tokens.py), for the routes that name their collection in the body or read documents."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Iterable
from typing import Annotated, Any

from cryptography.fernet import Fernet, InvalidToken
from fastapi import Depends, Request

from indexing.collection import Collection
from indexing.docstore import DocumentRecord
from indexing.filter_match import matches
from indexing.filters import Bool, Node
from service.access_tokens import ACCESS_STATE, FULL, Access
from service.document_api import get_documents
from service.errors import ApiError, parse_request_filter
from service.scroll_cursor import BadCursor


def access_of(request: Request) -> Access:
    """The access the key check found (FULL where authentication is off)."""
    access: Access = getattr(request.state, ACCESS_STATE, FULL)
    return access


RequestAccess = Annotated[Access, Depends(access_of)]
Codec = Callable[[str], str]
CURSOR_PAD = 2048  # characters a sealed cursor's text is padded to a multiple of (ids and values are shorter)


def require(access: Access, name: str, *, write: bool = False) -> None:
    """403 forbidden unless the request may read (or write) collection `name`."""
    refusal = access.grant.refusal(name, write=write) if access.grant is not None else None
    if refusal is not None:
        raise ApiError(403, "forbidden", refusal)


def pinned_filter(access: Access, name: str, schema: dict[str, Any]) -> Node | None:
    """The filter a scoped token pins on reads of collection `name`, parsed against its schema; None for none.
    A pinned filter the collection's schema refuses (an undeclared field under a strict schema) is a 403: the token
    no longer fits the collection, and reading without its filter would reach what it keeps out."""
    grant = access.grant.reaches(name) if access.grant is not None else None
    if grant is None or grant.filter is None:
        return None
    try:
        return parse_request_filter(grant.filter, schema, path="token.filter")
    except ApiError as exc:
        raise ApiError(403, "forbidden", f"this token's filter does not fit collection {name!r}: {exc.detail}") from exc


def read_filter(access: Access, name: str, raw: Any, schema: dict[str, Any], path: str = "filter") -> Node | None:
    """A read's filter: the request's (422 invalid_filter when it is not one), ANDed with the token's pin."""
    node = parse_request_filter(raw, schema, path)
    pin = pinned_filter(access, name, schema)
    if pin is None:
        return node
    return pin if node is None else Bool(must=(pin, node))


def visible_only(
    access: Access, name: str, schema: dict[str, Any], docs: list[DocumentRecord], *, asked: list[str]
) -> tuple[list[DocumentRecord], list[str]]:
    """A many-document read's (found, not found) with the documents outside the token's filter (if any) moved to
    not found, each list in the order asked."""
    pin = pinned_filter(access, name, schema)
    shown_docs = docs if pin is None else [d for d in docs if matches(pin, d.metadata, d.doc_id)]
    found = {d.doc_id for d in shown_docs}
    return shown_docs, [d for d in dict.fromkeys(asked) if d not in found]


def unreadable_ids(access: Access, name: str, coll: Collection, ids: list[str]) -> list[str]:
    """Under a pinned filter, those of `ids` the token cannot read: not stored, or kept out by the filter, alike
    (in the order given, each once); [] without a pin, where the recommendation says which are not stored."""
    pin = pinned_filter(access, name, coll.settings.schema)
    if pin is None:
        return []
    docs, _ = get_documents(coll=coll, ids=ids, passages=False)
    readable = {d.doc_id for d in docs if matches(pin, d.metadata, d.doc_id)}
    return [d for d in dict.fromkeys(ids) if d not in readable]


def reaches_job(access: Access, collection: str, resolve: Callable[[str], str]) -> bool:
    """Whether a token may follow a job of `collection` (the collection its job records, an alias resolved): one
    it may write, directly or through an alias. A job's error and result can name any of its documents, so a
    token that only reads (perhaps under a filter) sees no job."""
    if access.grant is None:
        return True
    return any(g.write and resolve(n) == collection for n, g in access.grant.collections.items())


def granted_names(access: Access, names: Iterable[str], resolve: Callable[[str], str]) -> list[str]:
    """The collections of `names` a listing shows to this access: all, or those a scoped token names (directly or
    through an alias)."""
    if access.grant is None:
        return list(names)
    reached = {resolve(n) for n in access.grant.collections}
    return [n for n in names if n in reached]


def cursor_seal(access: Access, name: str, schema: dict[str, Any]) -> tuple[Codec, Codec]:
    """(seal, unseal) of scroll cursors under this access. A cursor names the last document a page looked at,
    and under a pinned filter that may be one the token cannot read: its cursors are sealed (Fernet: AES and an
    HMAC, with a key derived from the token's signing key), so they say nothing and cannot be made by hand.
    Unpinned reads keep cursors as they are (both functions return their argument)."""
    grant = access.grant.reaches(name) if access.grant is not None else None
    if grant is None or grant.filter is None:  # (the read's filter has parsed the pin already: see read_filter)
        return str, str
    # Bound to the collection (by the name the token uses) and the pin, besides the signing key: another
    # tenant's cursor, or one made for another collection, does not open.
    scope = json.dumps([name, grant.filter], sort_keys=True, separators=(",", ":")).encode()
    digest = hmac.new(access.signing_key, b"vela scroll cursor v1\n" + scope, hashlib.sha256).digest()
    fernet = Fernet(base64.urlsafe_b64encode(digest))

    def seal(cursor: str) -> str:
        # Padded to a multiple of CURSOR_PAD characters first: a sealed text's length is its plaintext's, and the
        # position it holds may be a hidden document's id or value.
        padded = cursor + "\0" * (-len(cursor) % CURSOR_PAD)
        return fernet.encrypt(padded.encode()).decode()

    def unseal(cursor: str) -> str:
        try:
            return fernet.decrypt(cursor.encode()).decode().rstrip("\0")
        except (InvalidToken, ValueError) as exc:
            raise BadCursor(
                "cursor: not a cursor this API returned for this token's reads (pass next_cursor as it is)"
            ) from exc

    return seal, unseal


def shown_to(access: Access, alias: str) -> bool:
    """Whether a collection's alias is shown to this access: all to a key, to a scoped token those it names."""
    return access.grant is None or alias in access.grant.collections
